package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// cluster is the local cluster every test shares, with embedops' CRDs and
// the controller running in this process.
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithCluster(m, &cluster, harness.ClusterOptions{}, func(*harness.Cluster, string) (func(bool), error) {
		stop, err := startController()
		if err != nil {
			return nil, err
		}
		return func(bool) { stop() }, nil
	}))
}

// populatorImage is the image the controller gives populate containers;
// kwok never pulls it.
const populatorImage = "embedops:e2e"

// startController installs the CRDs and runs the manager with metrics and
// probes off, and the populator on.
func startController() (func(), error) {
	if err := operator.InstallCRDs(cluster.Config); err != nil {
		return nil, err
	}
	opts := controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"}
	opts.EmbeddingServer.ProgressInterval = 2 * time.Second
	// kwok completes populate containers with a simulated result.
	opts.EmbeddingServer.PopulatorImage = populatorImage
	return operator.Run(cluster.Config, opts)
}
