package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/rollout"
)

// rolloutReplicas is the replicas of the rollout benchmark's server.
const rolloutReplicas = 3

// RolloutReport is what each change of a 3-replica PerReplica server's
// cache decision did to its Service, and how long it took.
type RolloutReport struct {
	ProvisionDelaySeconds float64          `json:"provisionDelaySeconds"`
	Changes               []rollout.Result `json:"changes"`
}

// RunRollout starts an environment, creates a 3-replica server with a
// PerReplica cache and runs it through rollout.Changes.
func RunRollout(ctx context.Context, opts ScaleOptions) (_ *RolloutReport, err error) {
	env, err := StartEnv(ctx, EnvOptions{Nodes: 2, ProvisionDelay: opts.ProvisionDelay, ControllerArgs: opts.ControllerArgs, Log: opts.Log})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			env.logf("controller log (last lines):\n%s", lastLines(env.Controller.Logs(), 40))
		}
		err = errors.Join(err, env.Stop())
	}()
	const namespace, class = "rollout", "rollout-other"
	if err := env.createRolloutObjects(ctx, namespace, class); err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: namespace, Name: "rolling"}
	if err := env.WaitConverged(ctx, namespace, 1, opts.Timeout); err != nil {
		return nil, err
	}
	env.logf("running %s through every change of its cache", key.Name)
	results, err := rollout.Run(ctx, env.Client, env.Cluster.Clientset, key, rollout.Changes(2*time.Hour, class), opts.Timeout)
	if err != nil {
		return nil, err
	}
	return &RolloutReport{ProvisionDelaySeconds: opts.ProvisionDelay.Seconds(), Changes: results}, nil
}

// createRolloutObjects creates the namespace, a second StorageClass of the
// cluster's provisioner and the server.
func (e *Env) createRolloutObjects(ctx context.Context, namespace, class string) error {
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&storagev1.StorageClass{
			ObjectMeta:           metav1.ObjectMeta{Name: class},
			Provisioner:          harness.ProvisionerName,
			ReclaimPolicy:        new(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode:    new(storagev1.VolumeBindingImmediate),
			AllowVolumeExpansion: new(true),
		},
		&embedopsv1.EmbeddingServer{
			ObjectMeta: metav1.ObjectMeta{Name: "rolling", Namespace: namespace},
			Spec: embedopsv1.EmbeddingServerSpec{
				Model:    embedopsv1.ModelSpec{Name: benchModel},
				Replicas: new(int32(rolloutReplicas)),
				Cache:    embedopsv1.CacheSpec{Size: new(resource.MustParse("10Gi"))},
			},
		},
	}
	for _, obj := range objects {
		if err := e.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// Rows lays the report out: per change, the fewest ready endpoints and
// the time it took.
func (r *RolloutReport) Rows() []Row {
	rows := make([]Row, 0, len(r.Changes))
	for _, c := range r.Changes {
		how := "StatefulSet kept"
		if c.FromUID != c.ToUID {
			how = fmt.Sprintf("StatefulSet %s -> %s", c.From, c.To)
		}
		rows = append(rows, Row{
			Metric: "change " + c.Change,
			Value:  fmt.Sprintf("fewest ready %d/%d", c.FewestReady, c.Replicas),
			Note:   fmt.Sprintf("done in %.1f s (%d samples, every %s); %s; provisioner %.0f s per volume", c.Seconds, c.Samples, rollout.SampleInterval, how, r.ProvisionDelaySeconds),
		})
	}
	return rows
}
