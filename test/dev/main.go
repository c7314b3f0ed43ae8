// Command dev is `make dev`: a local kwok cluster, embedops' CRDs, the
// controller running in this process and the examples, then a status table
// of servers and bindings. Pods are simulated by kwok: no TEI process runs
// and no image is pulled. It holds the cluster until interrupted (or
// `make dev-down`), unless -hold=false.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// options are dev's flags.
type options struct {
	examples  string
	namespace string
	timeout   time.Duration
	hold      bool
	pidFile   string
}

func main() {
	var opts options
	flag.StringVar(&opts.examples, "examples", "examples", "directory of example manifests to apply")
	flag.StringVar(&opts.namespace, "namespace", "default", "namespace the examples are applied to")
	flag.DurationVar(&opts.timeout, "timeout", 5*time.Minute, "how long to wait for every example to be Ready")
	flag.BoolVar(&opts.hold, "hold", true, "keep the cluster running until interrupted")
	flag.StringVar(&opts.pidFile, "pid-file", ".dev/pid", "where to write this process's pid for make dev-down")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts options) error {
	if err := writePID(opts.pidFile); err != nil {
		return err
	}
	defer func() { _ = os.Remove(opts.pidFile) }()
	fmt.Println("dev: starting a local kwok cluster (pods are simulated: no TEI process runs, no image is pulled)")
	cluster, err := harness.StartCluster(ctx, harness.ClusterOptions{})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("dev: stopping the local cluster")
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "dev:", err)
		}
	}()
	if err := operator.InstallCRDs(cluster.Config); err != nil {
		return err
	}
	stopController, err := operator.Run(cluster.Config, controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"})
	if err != nil {
		return err
	}
	defer stopController()
	if err := applyExamples(ctx, cluster, opts.examples, opts.namespace); err != nil {
		return err
	}
	ready := waitForServers(ctx, cluster, opts.namespace, opts.timeout)
	if err := printStatus(ctx, cluster, opts.namespace); err != nil {
		return err
	}
	if ready != nil {
		return ready
	}
	fmt.Printf("dev: every example is Ready. Try: KUBECONFIG=%s kubectl get embedops -A\n", cluster.Kubeconfig)
	if opts.hold {
		fmt.Println("dev: holding the cluster; Ctrl-C or `make dev-down` stops it")
		<-ctx.Done()
	}
	return nil
}

// writePID records this process for make dev-down.
func writePID(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing the pid file: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		return errors.New("another make dev seems to be running (" + path + " exists): run make dev-down first")
	}
	return os.WriteFile(path, []byte(fmt.Sprint(os.Getpid())), 0o600)
}
