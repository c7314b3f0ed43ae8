package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/harness"
)

// cluster is the local cluster every test shares, with embedops' CRDs and
// the controller running in this process.
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	started, err := harness.StartCluster(context.Background(), harness.ClusterOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster = started
	defer func() {
		if err := started.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	stop, err := startController()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	return m.Run()
}

// startController installs the CRDs and runs the manager as `make run`
// would, with metrics and probes off.
func startController() (func(), error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("installing the CRDs: %w", err)
	}
	opts := controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"}
	opts.EmbeddingServer.ProgressInterval = 2 * time.Second
	mgr, err := controller.NewManager(cluster.Config, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controller.SetupReconcilers(ctx, mgr, opts); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "the manager stopped with:", err)
		}
	}, nil
}
