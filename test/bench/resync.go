package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Forced resyncs.
const (
	// benchFieldManager owns the benchmark's annotations.
	benchFieldManager = "embedops-bench"
	// touchAnnotation is the annotation a watch resync sets on the
	// StatefulSets; embedops neither sets nor reads it.
	touchAnnotation = "bench.embedops.dev/touched"
	// reconcileTotalMetric counts reconciles by controller and result.
	reconcileTotalMetric = "controller_runtime_reconcile_total"
)

// Resync asks for one reconcile of each of n servers in namespace, as
// `flux reconcile` does (reconcile.fluxcd.io/requestedAt=token, which
// changes neither spec nor generation), and waits until every server
// reports it handled (status.lastHandledReconcileAt=token).
func (e *Env) Resync(ctx context.Context, namespace string, n int, token string, timeout time.Duration) error {
	err := e.annotate(ctx, n, meta.ReconcileRequestAnnotation, token, func(name string) client.Object {
		return &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	})
	if err != nil {
		return fmt.Errorf("requesting reconciles: %w", err)
	}
	return e.waitAll(ctx, "reconcile requests "+token+" handled", timeout, func(ctx context.Context) (int, int, error) {
		var servers embedopsv1.EmbeddingServerList
		if err := e.Client.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
			return 0, n, err
		}
		done := 0
		for _, server := range servers.Items {
			if server.Status.LastHandledReconcileAt == token {
				done++
			}
		}
		return done, n, nil
	})
}

// TouchStatefulSets sets touchAnnotation=token on the StatefulSets of n
// servers in namespace, a metadata-only change by another field manager
// that wakes the controller through its Owns watch and changes nothing it
// desires, and waits until the EmbeddingServer controller has finished at
// least n reconciles since.
func (e *Env) TouchStatefulSets(ctx context.Context, namespace string, n int, token string, timeout time.Duration) error {
	start, err := e.Reconciles(ctx)
	if err != nil {
		return err
	}
	err = e.annotate(ctx, n, touchAnnotation, token, func(name string) client.Object {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	})
	if err != nil {
		return fmt.Errorf("touching StatefulSets: %w", err)
	}
	return e.waitAll(ctx, "reconciles after touch "+token, timeout, func(ctx context.Context) (int, int, error) {
		now, err := e.Reconciles(ctx)
		return min(int(now-start), n), n, err
	})
}

// annotate sets the annotation key=value on the objects that object names
// s0..s<n-1>, with a merge patch on the worker pool.
func (e *Env) annotate(ctx context.Context, n int, key, value string, object func(name string) client.Object) error {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value))
	return forEach(ctx, n, func(ctx context.Context, i int) error {
		return e.Client.Patch(ctx, object(serverName(i)), patch, client.FieldOwner(benchFieldManager))
	})
}

// Reconciles reads how many reconciles the EmbeddingServer controller has
// finished, whatever their result.
func (e *Env) Reconciles(ctx context.Context) (float64, error) {
	families, err := e.Controller.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	return counterSum(families, reconcileTotalMetric, "controller", serverController)
}
