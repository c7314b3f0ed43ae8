package security

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// populatorImage is the image the controller gives populate containers;
// kwok never pulls it and completes them with a simulated result.
const populatorImage = "embedops:security"

// controllerArgs run the controller at debug level, so the token test reads
// everything it may say, with the populate init container and Job on and
// no endpoint check, since it runs outside the cluster.
var controllerArgs = []string{
	"--log-level=debug",
	"--progress-interval=2s",
	"--endpoint-check=off",
	"--populator-image=" + populatorImage,
}

// controllerStart bounds building and starting the controller.
const controllerStart = 5 * time.Minute

// Shared by every test: one cluster and one controller reconciling every
// namespace; each test works in namespaces of its own.
var (
	cluster    *harness.Cluster
	controller *harness.ControllerProcess
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "embedops-security-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
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
	if controller, err = startController(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := controller.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}

// startController installs the CRDs, builds the controller into dir and
// runs it against the cluster.
func startController(dir string) (*harness.ControllerProcess, error) {
	if err := operator.InstallCRDs(cluster.Config); err != nil {
		return nil, err
	}
	binary, err := harness.BuildController(dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), controllerStart)
	defer cancel()
	proc, err := harness.StartController(ctx, binary, cluster.Kubeconfig, controllerArgs...)
	if err != nil {
		return nil, errors.Join(errors.New("starting the controller"), err)
	}
	return proc, nil
}
