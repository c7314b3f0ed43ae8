package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Local cluster timings.
const (
	// startTimeout bounds StartCluster when its context has no earlier
	// deadline; a start takes about 8s on 2 cores.
	startTimeout = 2 * time.Minute
	// stopTimeout bounds Stop, including waiting for the components to exit.
	stopTimeout = 30 * time.Second
	// namespaceTimeout bounds waiting for a new namespace's ServiceAccount,
	// which kube-controller-manager creates within milliseconds.
	namespaceTimeout = 30 * time.Second
	// pollInterval is how often start-up conditions are checked.
	pollInterval = 200 * time.Millisecond
	// logTailLines is how much of each component log a start error shows.
	logTailLines = 15
)

// clusterComponents are the components kwokctl runs, all from ./bin.
// Naming them keeps out every optional one (metrics-server, Prometheus,
// Jaeger, the dashboard), which kwokctl would download.
var clusterComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// ClusterOptions adjust the local cluster.
type ClusterOptions struct {
	// Nodes is the number of kwok nodes; zero means 2.
	Nodes int
	// AuditPolicy is the path of a kube-apiserver audit policy; when set,
	// the API server writes its audit log to AuditLogPath.
	AuditPolicy string
	// ProvisionDelay is how long the provisioner takes per volume, as a
	// storage backend does; zero binds claims as soon as they are seen.
	ProvisionDelay time.Duration
}

// Cluster is a local cluster run by kwokctl from the binaries in ./bin:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
// all listening on 127.0.0.1. kwok simulates the nodes and the pods'
// kubelets with the Stages in stages/ (see SimulateAnnotation), and an
// in-process test provisioner binds claims of DefaultStorageClass and
// NoCloneStorageClass, cloning and restoring volumes as a CSI driver does
// (storage.go). The CSI snapshot CRDs are installed and the real
// snapshot-controller runs beside the provisioner's csi-snapshotter
// stand-in (snapshots.go, snapshotter.go). All its state is in a
// temporary directory; Stop removes it and ends every process.
type Cluster struct {
	// Name is kwokctl's name for the cluster, unique per start.
	Name string
	// Kubeconfig is the path of an administrator kubeconfig.
	Kubeconfig string
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client with embedops' kinds registered.
	Client client.Client
	// Clientset is a typed client for the built-in kinds.
	Clientset kubernetes.Interface
	// Scheme knows the built-in kinds and embedops' kinds.
	Scheme *runtime.Scheme

	kwokctl         string
	dir             string
	env             []string
	stopProvisioner func()
	provisionerLog  *os.File
	// snapshotController is the real snapshot-controller (snapshots.go).
	snapshotController *Process
	stopOnce           sync.Once
	stopErr            error
}

// StartCluster creates a local cluster with opts.Nodes Ready nodes, the
// default StorageClass and its provisioner, and waits until pods can run.
// A failed start stops what it started and returns an error with the tail
// of every component's log.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	binaries := map[string]string{}
	for _, name := range []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if binaries[name], err = Binary(root, name); err != nil {
			return nil, err
		}
	}
	kubectl, err := kubectlPath(root)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "embedops-kwok-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster directory: %w", err)
	}
	c := &Cluster{
		Name:       fmt.Sprintf("embedops-%08x", rand.Uint32()),
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		kwokctl:    binaries["kwokctl"],
		dir:        dir,
		env:        kwokctlEnv(dir, filepath.Dir(kubectl)),
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := c.start(ctx, opts, binaries, kubectl); err != nil {
		err = fmt.Errorf("starting the local cluster %s: %w\n%s", c.Name, err, c.ComponentLogs(logTailLines))
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// start runs kwokctl, adds the nodes and the storage, and waits for them.
func (c *Cluster) start(ctx context.Context, opts ClusterOptions, binaries map[string]string, kubectl string) error {
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	config, err := kwokctlConfig(kwokctlOptions{BindAddress: "127.0.0.1", KubectlBinary: kubectl, EtcdPeerPort: ports[5]})
	if err != nil {
		return err
	}
	configPath := filepath.Join(c.dir, "kwokctl.yaml")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return fmt.Errorf("writing the kwokctl configuration: %w", err)
	}
	args := []string{"--config", configPath, "create", "cluster",
		"--runtime", "binary",
		"--components", strings.Join(clusterComponents, ","),
		"--disable", "metrics-server,prometheus,jaeger,dashboard",
		"--etcd-binary", binaries["etcd"],
		"--kube-apiserver-binary", binaries["kube-apiserver"],
		"--kube-controller-manager-binary", binaries["kube-controller-manager"],
		"--kube-scheduler-binary", binaries["kube-scheduler"],
		"--kwok-controller-binary", binaries["kwok"],
		"--kube-apiserver-port", fmt.Sprint(ports[0]),
		"--etcd-port", fmt.Sprint(ports[1]),
		"--controller-port", fmt.Sprint(ports[2]),
		"--kube-controller-manager-port", fmt.Sprint(ports[3]),
		"--kube-scheduler-port", fmt.Sprint(ports[4]),
		"--disable-qps-limits",
		"--quiet-pull",
		"--kubeconfig", c.Kubeconfig,
	}
	if opts.AuditPolicy != "" {
		args = append(args, "--kube-audit-policy", opts.AuditPolicy)
	}
	if err := c.run(ctx, args...); err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	if err := c.poll(ctx, "kube-apiserver to be ready", c.apiServerReady); err != nil {
		return err
	}
	// Every node also offers GPUs, so GPU servers schedule.
	if err := c.run(ctx, "scale", "node", "--replicas", fmt.Sprint(opts.Nodes), "--param", `.allocatable."nvidia.com/gpu"=8`); err != nil {
		return err
	}
	if err := c.startStorage(ctx, opts.ProvisionDelay); err != nil {
		return err
	}
	if err := c.poll(ctx, fmt.Sprintf("%d Ready nodes", opts.Nodes), c.supervised(c.nodesReady(opts.Nodes))); err != nil {
		return err
	}
	return c.poll(ctx, "the default ServiceAccount", c.supervised(c.serviceAccountExists(metav1.NamespaceDefault)))
}

// connect builds the clients from the kubeconfig kwokctl wrote.
func (c *Cluster) connect() error {
	config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	// Tests poll; client-go's default 5 QPS would throttle them.
	config.QPS, config.Burst = 50, 100
	built, err := newClients(config)
	if err != nil {
		return err
	}
	c.Config, c.Scheme, c.Client, c.Clientset = config, built.scheme, built.client, built.clientset
	return nil
}

// startStorage installs the snapshot CRDs, creates the StorageClasses, the
// CSIDrivers and the VolumeSnapshotClasses, and starts the provisioner
// (which takes delay per volume), its snapshotter and the
// snapshot-controller.
func (c *Cluster) startStorage(ctx context.Context, delay time.Duration) error {
	if err := InstallSnapshotCRDs(c.Config); err != nil {
		return err
	}
	snapshots, err := snapshotclient.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("creating a snapshot client: %w", err)
	}
	err = createStorageObjects(ctx, c.Clientset, snapshots,
		[]*storagev1.StorageClass{defaultStorageClass(), noCloneStorageClass()},
		csiDrivers(ProvisionerName, NoCloneProvisionerName), snapshotClasses(ProvisionerName, NoCloneProvisionerName))
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(c.dir, "provisioner.log"))
	if err != nil {
		return fmt.Errorf("creating the provisioner log: %w", err)
	}
	c.provisionerLog = logFile
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(logFile, prefix, args) }, funcr.Options{Verbosity: 2})
	driver, err := newVolumeDriver(ProvisionerName, NoCloneProvisionerName, c.dir, c.Clientset, snapshots, logger.WithName("driver"))
	if err != nil {
		return err
	}
	stopProvisioner := startProvisioner(c.Clientset, driver, delay, logger)
	stopSnapshotter, err := runSnapshotter(driver, logger.WithName("snapshotter"))
	if err != nil {
		stopProvisioner()
		return err
	}
	c.stopProvisioner = func() { stopSnapshotter(); stopProvisioner() }
	c.snapshotController, err = StartSnapshotController(ctx, c.Kubeconfig, c.dir)
	return err
}

// run runs kwokctl on this cluster, returning its output in the error.
// Cancelling ctx kills kwokctl's process group, so that the kubectl it runs
// dies with it; the components it started are in sessions of their own and
// are ended by Stop.
func (c *Cluster) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, c.kwokctl, append([]string{"--name", c.Name}, args...)...)
	cmd.Env = c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), errors.Join(err, ctx.Err()), tail(out.String(), logTailLines))
	}
	return nil
}

// poll waits until condition holds, naming what it waited for and the last
// error seen when ctx ends first.
func (c *Cluster) poll(ctx context.Context, what string, condition func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		last = condition(ctx)
		return last == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case last == nil:
		return fmt.Errorf("waiting for %s: %w", what, err)
	default:
		return fmt.Errorf("waiting for %s: %w (last: %w)", what, err, last)
	}
}

// apiServerReady checks kube-apiserver's /readyz.
func (c *Cluster) apiServerReady(ctx context.Context) error {
	body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz says %q", body)
	}
	return nil
}

// nodesReady checks that n nodes have Ready=True.
func (c *Cluster) nodesReady(n int) func(context.Context) error {
	return func(ctx context.Context) error {
		nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, condition := range node.Status.Conditions {
				if condition.Type == corev1.NodeReady && condition.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < n {
			return fmt.Errorf("%d of %d nodes are Ready", ready, n)
		}
		return nil
	}
}

// serviceAccountExists checks that kube-controller-manager created the
// namespace's default ServiceAccount, without which pods are rejected.
func (c *Cluster) serviceAccountExists(namespace string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := c.Clientset.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err
	}
}

// Namespace creates a namespace unique to the test, waits until pods can be
// created in it and deletes it when the test ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	namespace := Namespace(t, c.Client)
	ctx, cancel := context.WithTimeout(t.Context(), namespaceTimeout)
	defer cancel()
	if err := c.poll(ctx, "the default ServiceAccount of "+namespace, c.serviceAccountExists(namespace)); err != nil {
		t.Fatal(err)
	}
	return namespace
}

// Stop stops the provisioner, deletes the cluster with kwokctl, makes sure
// none of its processes is left and removes its directory. It is safe to
// call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	var errs []error
	if c.snapshotController != nil {
		errs = append(errs, c.snapshotController.Stop())
	}
	if c.stopProvisioner != nil {
		c.stopProvisioner()
	}
	if c.provisionerLog != nil {
		_ = c.provisionerLog.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	pids := c.componentPIDs()
	if err := c.run(ctx, "delete", "cluster", "--kubeconfig", c.Kubeconfig); err != nil {
		errs = append(errs, err)
	}
	if err := c.endComponents(ctx, pids); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the cluster directory: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping the local cluster %s: %w", c.Name, err)
	}
	return nil
}

// ClusterSetup prepares a started cluster for a package's tests; dir is a
// temporary directory removed after them. It returns what to undo after the
// tests (nil for nothing), told whether a test failed.
type ClusterSetup func(cluster *Cluster, dir string) (teardown func(failed bool), err error)

// RunWithCluster is a TestMain body: it starts a local cluster into
// *cluster, runs the setups in order, runs the tests, undoes the setups in
// reverse order and stops the cluster, returning the exit code.
func RunWithCluster(m *testing.M, cluster **Cluster, opts ClusterOptions, setups ...ClusterSetup) int {
	dir, err := os.MkdirTemp("", "embedops-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	started, err := StartUnlessSignalled(context.Background(), func(ctx context.Context) (*Cluster, error) { return StartCluster(ctx, opts) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*cluster = started
	done := StopOnSignal("the local cluster", started.Stop)
	code := runWithSetups(m, started, dir, setups)
	done()
	if err := started.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// runWithSetups runs the setups, the tests when every setup succeeded, and
// the teardowns of the setups that ran, last first.
func runWithSetups(m *testing.M, cluster *Cluster, dir string, setups []ClusterSetup) int {
	var teardowns []func(bool)
	code := 0
	for _, setup := range setups {
		teardown, err := setup(cluster, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			break
		}
		if teardown != nil {
			teardowns = append(teardowns, teardown)
		}
	}
	if code == 0 {
		code = m.Run()
	}
	for i := len(teardowns) - 1; i >= 0; i-- {
		teardowns[i](code != 0)
	}
	return code
}
