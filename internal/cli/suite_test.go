package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/harness"
)

// cluster is the envtest control plane, with embedops' reconcilers running,
// that the tests of commands reading a cluster share. It starts with the
// first such test, so the pure tests of the package need no control plane.
var cluster struct {
	once       sync.Once
	env        *harness.Env
	kubeconfig string
	stop       func() error
	err        error
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if cluster.stop != nil {
		if err := cluster.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// reconciledCluster returns the shared control plane and the path of its
// kubeconfig, starting both and the controller's reconcilers on first use.
func reconciledCluster(t *testing.T) (*harness.Env, string) {
	t.Helper()
	cluster.once.Do(func() { cluster.err = startCluster() })
	if cluster.err != nil {
		t.Fatalf("starting the control plane: %v", cluster.err)
	}
	return cluster.env, cluster.kubeconfig
}

// startCluster starts envtest and a manager running SetupReconcilers with
// the controller's defaults, as cmd/controller does outside a cluster.
func startCluster() error {
	env, err := harness.StartEnv(harness.EnvOptions{})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "embedops-cli-test-")
	if err != nil {
		return errors.Join(err, env.Stop())
	}
	cluster.env, cluster.kubeconfig = env, filepath.Join(dir, "kubeconfig")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cluster.stop = func() error {
		cancel()
		stopped := <-done
		if errors.Is(stopped, context.Canceled) {
			stopped = nil
		}
		return errors.Join(stopped, env.Stop(), os.RemoveAll(dir))
	}
	if err := env.WriteKubeconfig(cluster.kubeconfig); err != nil {
		done <- nil
		return err
	}
	opts := controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"}
	// envtest binds no claim: a new server references its binding at once,
	// as it does once its claims are Bound.
	opts.ModelCacheBinding.FirstReferenceWait = -1
	mgr, err := controller.NewManager(env.Config, opts)
	if err == nil {
		err = controller.SetupReconcilers(ctx, mgr, opts)
	}
	if err != nil {
		done <- nil
		return err
	}
	go func() { done <- mgr.Start(ctx) }()
	return nil
}
