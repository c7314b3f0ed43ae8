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
	os.Exit(harness.RunWithCluster(m, &cluster, harness.ClusterOptions{}, setUpController))
}

// setUpController runs the controller as its own process.
func setUpController(_ *harness.Cluster, dir string) (func(bool), error) {
	var err error
	if controller, err = startController(dir); err != nil {
		return nil, err
	}
	return func(bool) {
		if err := controller.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}, nil
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
