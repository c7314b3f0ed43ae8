package argocd

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

// The environment every test shares: the local cluster, Argo CD as child
// processes, the embedops controller in this process and a git server on
// loopback.
var (
	cluster   *harness.Cluster
	gitServer *gittestserver.GitServer
)

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithCluster(m, &cluster, harness.ClusterOptions{}, setUpArgoCD, setUpController, setUpGitServer))
}

// setUpArgoCD runs Argo CD, whose logs are shown when a test failed.
func setUpArgoCD(c *harness.Cluster, dir string) (func(bool), error) {
	argo, err := harness.StartArgoCD(context.Background(), c.Kubeconfig, dir)
	if err != nil {
		return nil, err
	}
	return func(failed bool) {
		if failed {
			fmt.Fprintln(os.Stderr, argo.LogTails())
		}
		if err := argo.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}, nil
}

// setUpController installs embedops' CRDs and runs the manager in this
// process with metrics and probes off, looking again at waiting servers and
// retiring bindings every 2s.
func setUpController(c *harness.Cluster, _ string) (func(bool), error) {
	if err := operator.InstallCRDs(c.Config); err != nil {
		return nil, err
	}
	opts := controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"}
	opts.EmbeddingServer.ProgressInterval = 2 * time.Second
	opts.ModelCacheBinding.ReleaseInterval = 2 * time.Second
	stop, err := operator.Run(c.Config, opts)
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
