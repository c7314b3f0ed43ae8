package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Env is a running envtest control plane with embedops' CRDs installed.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client with embedops' kinds registered.
	Client client.Client
	// Scheme knows the built-in kinds and embedops' kinds.
	Scheme *runtime.Scheme

	environment *envtest.Environment
}

// EnvOptions adjust the control plane.
type EnvOptions struct {
	// CRDPaths replace config/crd/bases as embedops' CRDs, e.g. a previous
	// release's read from git (test/upgrade); empty means config/crd/bases.
	CRDPaths []string
	// ExtraCRDPaths are more CRD files or directories, e.g. Flux's.
	ExtraCRDPaths []string
}

// NewScheme returns a scheme with the built-in kinds, embedops' kinds and
// the CSI snapshot kinds (snapshot.storage.k8s.io/v1), which the kwok
// cluster and the real node serve.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, snapshotv1.AddToScheme, embedopsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return scheme, nil
}

// crdInstallTimeout bounds the wait for installed CRDs to be served.
const crdInstallTimeout = 2 * time.Minute

// KubeAPIServerEnv names the variable that selects the kube-apiserver
// envtest starts instead of bin/kube-apiserver: make test-floor sets it to
// bin/floor/kube-apiserver, the oldest supported Kubernetes. A relative
// path is taken from the repository root.
const KubeAPIServerEnv = "EMBEDOPS_KUBE_APISERVER"

// KubeAPIServer returns the kube-apiserver envtest starts: $EMBEDOPS_KUBE_APISERVER
// when set, else bin/kube-apiserver; an error when it is missing.
func KubeAPIServer(root string) (string, error) {
	path := os.Getenv(KubeAPIServerEnv)
	if path == "" {
		return Binary(root, "kube-apiserver")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("the kube-apiserver %s names is missing: run 'make tools' first: %w", KubeAPIServerEnv, err)
	}
	return path, nil
}

// StartEnv starts kube-apiserver (see KubeAPIServer) and etcd from ./bin,
// each to die with the test binary (dieWithTestBinary), and installs the
// CRDs from config/crd/bases (or opts.CRDPaths), failing when they are
// missing.
func StartEnv(opts EnvOptions) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	apiServer, err := KubeAPIServer(root)
	if err != nil {
		return nil, err
	}
	etcd, err := Binary(root, "etcd")
	if err != nil {
		return nil, err
	}
	if apiServer, err = dieWithTestBinary(root, apiServer); err != nil {
		return nil, err
	}
	if etcd, err = dieWithTestBinary(root, etcd); err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	crds := opts.CRDPaths
	if len(crds) == 0 {
		crds = []string{filepath.Join(root, "config", "crd", "bases")}
	}
	environment := &envtest.Environment{
		Scheme:                scheme,
		BinaryAssetsDirectory: filepath.Join(root, "bin"),
		CRDDirectoryPaths:     slices.Concat(crds, opts.ExtraCRDPaths),
		ErrorIfCRDPathMissing: true,
		// envtest waits 10s by default for the CRDs to be served; a loaded
		// 2-core machine can take longer for Flux's and Argo CD's.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: crdInstallTimeout},
	}
	environment.ControlPlane.APIServer = &envtest.APIServer{Path: apiServer}
	environment.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	cfg, err := environment.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = environment.Stop()
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, environment: environment}, nil
}

// WriteKubeconfig writes to path a kubeconfig of an administrator of the
// control plane, for commands that read one as kubectl does.
func (e *Env) WriteKubeconfig(path string) error {
	user, err := e.environment.AddUser(envtest.User{Name: "embedops-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding an administrator: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("building a kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return nil
}

// Stop stops the control plane.
func (e *Env) Stop() error {
	return e.environment.Stop()
}

// RunWithEnv is a TestMain body: it starts a control plane into *env, runs
// the tests and stops it, returning the exit code.
func RunWithEnv(m *testing.M, env **Env, opts EnvOptions) int {
	started, err := StartEnv(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*env = started
	done := StopOnSignal("envtest", started.Stop)
	code := m.Run()
	done()
	if err := started.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
