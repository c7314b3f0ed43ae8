package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

var (
	cycles = flag.Int("chaos.cycles", 50, "controller kill cycles of TestControllerKilledAtRandomPoints")
	seed   = flag.Uint64("chaos.seed", 0, "seed of the fault schedule; 0 picks one, logged for replay")
)

// fastClass is a second StorageClass of the test provisioner, so that a
// change of class rotates a server's binding; it allows volume expansion,
// so that a larger size grows its claims in place.
const fastClass = "fast"

// Shared by the tests, which run one after another: each runs its own
// controller processes, and two controllers outside leader election would
// both reconcile every namespace.
var (
	cluster    *harness.Cluster
	controller string
	watcher    client.WithWatch
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(harness.RunWithCluster(m, &cluster, harness.ClusterOptions{}, func(_ *harness.Cluster, dir string) (func(bool), error) {
		return nil, setUp(dir)
	}))
}

// setUp installs the CRDs and the second StorageClass and builds the
// controller.
func setUp(dir string) error {
	if err := operator.InstallCRDs(cluster.Config); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: fastClass},
		Provisioner:          harness.ProvisionerName,
		ReclaimPolicy:        new(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    new(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: new(true),
	}
	if err := cluster.Client.Create(ctx, class); err != nil {
		return fmt.Errorf("creating StorageClass %s: %w", fastClass, err)
	}
	var err error
	if watcher, err = client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Scheme}); err != nil {
		return fmt.Errorf("creating a watching client: %w", err)
	}
	controller, err = harness.BuildController(dir)
	return err
}
