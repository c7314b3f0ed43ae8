package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Flux is Flux's source-controller and kustomize-controller from ./bin,
// running as child processes against the local cluster, watching every
// namespace, their logs in files.
type Flux struct {
	// Source is source-controller.
	Source *Process
	// Kustomize is kustomize-controller.
	Kustomize *Process
}

// StartFlux runs source-controller, its artifacts in dir and served on a
// free loopback port, and kustomize-controller; their logs go to
// dir/<name>.log. It waits until both are ready.
func StartFlux(ctx context.Context, kubeconfig, dir string) (*Flux, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	storage := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(storage, 0o750); err != nil {
		return nil, fmt.Errorf("creating the artifact storage: %w", err)
	}
	storageAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	source, err := startFluxController(ctx, "source-controller", kubeconfig, dir, ports[1:3],
		"--storage-path="+storage, "--storage-addr="+storageAddr, "--storage-adv-addr="+storageAddr)
	if err != nil {
		return nil, err
	}
	kustomize, err := startFluxController(ctx, "kustomize-controller", kubeconfig, dir, ports[3:5])
	if err != nil {
		return nil, errors.Join(err, source.Stop())
	}
	return &Flux{Source: source, Kustomize: kustomize}, nil
}

// startFluxController runs bin/<name> with leader election off, watching
// every namespace, metrics and health probes on the two loopback ports, and
// args; it waits until the readiness probe answers. Flux controllers read
// the kubeconfig from $KUBECONFIG: they have no --kubeconfig flag.
func startFluxController(ctx context.Context, name, kubeconfig, dir string, ports []uint32, args ...string) (*Process, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	binary, err := Binary(root, name)
	if err != nil {
		return nil, err
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[1])
	return StartProcess(ctx, ProcessOptions{
		Name:   name,
		Binary: binary,
		Args: append([]string{
			"--enable-leader-election=false",
			"--watch-all-namespaces=true",
			fmt.Sprintf("--metrics-addr=127.0.0.1:%d", ports[0]),
			"--health-addr=" + health,
			"--log-encoding=console",
		}, args...),
		Kubeconfig: kubeconfig,
		LogPath:    filepath.Join(dir, name+".log"),
		ReadyURL:   "http://" + health + "/readyz",
	})
}

// Processes are the controllers, source-controller first.
func (f *Flux) Processes() []*Process { return []*Process{f.Source, f.Kustomize} }

// Stop stops kustomize-controller, then source-controller.
func (f *Flux) Stop() error {
	return errors.Join(f.Kustomize.Stop(), f.Source.Stop())
}

// LogTails is the end of both controllers' logs.
func (f *Flux) LogTails() string {
	return f.Source.LogTail() + "\n" + f.Kustomize.LogTail()
}

// InstallFluxCRDs installs the Flux CRDs `make tools` copies into
// bin/crds/flux and waits until the API server serves them.
func InstallFluxCRDs(cfg *rest.Config) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	path, err := Binary(root, "crds/flux")
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{path}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the Flux CRDs: %w", err)
	}
	return nil
}
