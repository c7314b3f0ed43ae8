// Package operator runs embedops itself in tests, benchmarks and make dev:
// it installs the CRDs and starts the manager in-process. It is apart from
// test/harness because internal/controller's own tests use the harness.
package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/harness"
)

// InstallCRDs installs embedops' CRDs from config/crd/bases and waits until
// the API server serves them.
func InstallCRDs(cfg *rest.Config) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	return nil
}

// Run runs embedops' manager in this process, as `make run`
// would, and returns a function that stops it.
func Run(cfg *rest.Config, opts controller.ManagerOptions) (func(), error) {
	mgr, err := controller.NewManager(cfg, opts)
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
