package gitops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/gittestserver"

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
	if gitServer, err = harness.StartGitServer(filepath.Join(dir, "git")); err != nil {
		return nil, err
	}
	return func(bool) { gitServer.StopHTTP() }, nil
}

// setUpFlux runs Flux's controllers, whose logs are shown when a test failed.
func setUpFlux(c *harness.Cluster, dir string) (func(bool), error) {
	flux, err := harness.StartFlux(context.Background(), c.Kubeconfig, dir)
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
	if err := harness.InstallFluxCRDs(cluster.Config); err != nil {
		return nil, err
	}
	opts := controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"}
	opts.EmbeddingServer.ProgressInterval = 2 * time.Second
	opts.ModelCacheBinding.ReleaseInterval = 2 * time.Second
	return operator.Run(cluster.Config, opts)
}

// stopFlux stops the Flux controllers, printing the tail of their logs when
// the tests failed.
func stopFlux(flux *harness.Flux, failed bool) {
	if failed {
		fmt.Fprintln(os.Stderr, flux.LogTails())
	}
	if err := flux.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
