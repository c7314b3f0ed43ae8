package gitops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// The environment every test shares: the local cluster with embedops'
// and Flux's CRDs, the embedops controller in this process, Flux's
// controllers as child processes, and a git server on loopback.
var (
	cluster   *harness.Cluster
	gitServer *gittestserver.GitServer
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithCluster(m, &cluster, harness.ClusterOptions{}, setUpController, setUpGitServer, setUpFlux))
}

// setUpController runs embedops in this process.
func setUpController(*harness.Cluster, string) (func(bool), error) {
	stop, err := startController()
	if err != nil {
		return nil, err
	}
	return func(bool) { stop() }, nil
}

// setUpGitServer serves repositories from dir/git.
func setUpGitServer(_ *harness.Cluster, dir string) (func(bool), error) {
	var err error
	if gitServer, err = startGitServer(filepath.Join(dir, "git")); err != nil {
		return nil, err
	}
	return func(bool) { gitServer.StopHTTP() }, nil
}

// setUpFlux runs Flux's controllers, whose logs are shown when a test failed.
func setUpFlux(c *harness.Cluster, dir string) (func(bool), error) {
	flux, err := startFlux(context.Background(), c.Kubeconfig, dir)
	if err != nil {
		return nil, err
	}
	return func(failed bool) { stopFlux(flux, failed) }, nil
}

// startController installs embedops' and Flux's CRDs and runs the manager
// with metrics and probes off, looking again at waiting servers and
// retiring bindings every 2s.
func startController() (func(), error) {
	if err := operator.InstallCRDs(cluster.Config); err != nil {
		return nil, err
	}
	if err := installFluxCRDs(cluster.Config); err != nil {
		return nil, err
	}
	opts := controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"}
	opts.EmbeddingServer.ProgressInterval = 2 * time.Second
	opts.ModelCacheBinding.ReleaseInterval = 2 * time.Second
	return operator.Run(cluster.Config, opts)
}

// installFluxCRDs installs the Flux CRDs `make tools` copies into
// bin/crds/flux and waits until the API server serves them.
func installFluxCRDs(cfg *rest.Config) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	path, err := harness.Binary(root, "crds/flux")
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{path}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the Flux CRDs: %w", err)
	}
	return nil
}

// startGitServer serves the repositories under dir over HTTP on loopback.
func startGitServer(dir string) (*gittestserver.GitServer, error) {
	server := gittestserver.NewGitServer(dir)
	if err := server.StartHTTP(); err != nil {
		return nil, fmt.Errorf("starting the git server: %w", err)
	}
	return server, nil
}

// stopFlux stops the Flux controllers, printing the tail of their logs when
// the tests failed.
func stopFlux(flux []*fluxController, failed bool) {
	for _, c := range flux {
		if failed {
			fmt.Fprintln(os.Stderr, c.logTail())
		}
		if err := c.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}
