package binding

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/decision"
)

// DefaultHistoryLimit is how many Released bindings are kept per
// server.
const DefaultHistoryLimit = ledger.DefaultHistoryLimit

// Options configure the ModelCacheBinding
// reconciler.
type Options struct {
	// HistoryLimit is how many Released bindings are kept per server; 0
	// means DefaultHistoryLimit.
	HistoryLimit int
	// ReleaseInterval is how often a Retiring binding looks at its claims;
	// 0 means ledger.DefaultReleaseInterval.
	ReleaseInterval time.Duration
	// FirstReferenceWait is how long a new server's first reference of the
	// binding it created waits for the claims to bind; 0 means
	// ledger.DefaultFirstReferenceWait, a negative value none.
	FirstReferenceWait time.Duration
}

// Reconciler runs the binding lifecycle through the
// ledger: idle bindings retire after retainFor, Retiring bindings delete
// their claims and become Released, old Released bindings are pruned.
type Reconciler struct {
	// client reads from the informer cache; every write goes through the
	// ledger.
	client client.Reader
	ledger *ledger.Ledger
	// ShardKeys are the labels that place a server in a shard
	// (watch.ShardKeys).
	ShardKeys []string
}

// SetupWithManager wires the reconciler into mgr: bindings, the claims they
// own and the StorageClasses they record.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, l *ledger.Ledger) error {
	r.client, r.ledger = mgr.GetClient(), l
	if err := mgr.GetFieldIndexer().IndexField(ctx, &embedopsv1.ModelCacheBinding{}, storageIndex, storageNames); err != nil {
		return fmt.Errorf("indexing bindings by storage: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&embedopsv1.ModelCacheBinding{}).
		// A PerReplica claim is made by the StatefulSet controller and has
		// no owner: it is mapped by its embedops.dev/cache-binding label,
		// as a Shared claim, which the binding also controls, is.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfClaim)).
		// A successor waits for its predecessor to be Released before it
		// may retire.
		Watches(&embedopsv1.ModelCacheBinding{}, handler.EnqueueRequestsFromMapFunc(successorOfBinding)).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfStorageClass)).
		// A server that leaves the shard (relabelled out of the watch
		// selector: its informer reports a delete) or changes its shard
		// labels leaves its bindings here to their shard's controller,
		// which drops its reference (ledger: dropDanglingReferences).
		Watches(&embedopsv1.EmbeddingServer{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfServer),
			builder.WithPredicates(r.shardChanged())).
		Complete(r)
}

// Reconcile moves one binding along its lifecycle.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	binding := &embedopsv1.ModelCacheBinding{}
	if err := r.client.Get(ctx, req.NamespacedName, binding); err != nil {
		if apierrors.IsNotFound(err) {
			r.ledger.ForgetBinding(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.ledger.Advance(ctx, binding)
}

// storageIndex is the cache index of bindings by their storage name
// (decision.StorageName): a successor is found by the name its claims
// carry.
const storageIndex = "spec.resources.storageName"

// storageNames is storageIndex's function.
func storageNames(obj client.Object) []string {
	binding, ok := obj.(*embedopsv1.ModelCacheBinding)
	if !ok {
		return nil
	}
	return []string{decision.StorageName(binding)}
}

// bindingsOfClaim maps a cache claim to the bindings of the storage its
// embedopsv1.CacheBindingLabel names (builder: claim templates and Shared
// claims carry it), so a binding's Ready follows its claims' phases, a
// successor's too.
func (r *Reconciler) bindingsOfClaim(ctx context.Context, claim client.Object) []reconcile.Request {
	name := claim.GetLabels()[embedopsv1.CacheBindingLabel]
	if name == "" {
		return nil
	}
	requests := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: claim.GetNamespace(), Name: name}}}
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.client.List(ctx, &bindings, client.InNamespace(claim.GetNamespace()), client.MatchingFields{storageIndex: name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the bindings of a claim", "claim", claim.GetName())
		return requests
	}
	for i := range bindings.Items {
		if bindings.Items[i].Name != name {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&bindings.Items[i])})
		}
	}
	return requests
}

// successorOfBinding maps a binding to the one it hands its storage to.
func successorOfBinding(_ context.Context, obj client.Object) []reconcile.Request {
	binding, ok := obj.(*embedopsv1.ModelCacheBinding)
	if !ok || !decision.HandingOver(binding) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: binding.Namespace, Name: binding.Status.SupersededBy}}}
}

// bindingsOfServer maps a server to the bindings that reference it.
func (r *Reconciler) bindingsOfServer(ctx context.Context, server client.Object) []reconcile.Request {
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.client.List(ctx, &bindings, client.InNamespace(server.GetNamespace()),
		client.MatchingFields{ledger.ReferenceIndex: string(server.GetUID())}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the bindings of a server", "server", client.ObjectKeyFromObject(server))
		return nil
	}
	requests := make([]reconcile.Request, 0, len(bindings.Items))
	for i := range bindings.Items {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&bindings.Items[i])})
	}
	return requests
}

// shardChanged passes the server events after which a binding may hold the
// reference of a server of another shard: a delete (also what the informer
// of a sharded controller reports when a server stops matching its
// selector) and an update of the shard labels.
func (r *Reconciler) shardChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !maps.Equal(decision.ShardLabels(e.ObjectOld.GetLabels(), r.ShardKeys), decision.ShardLabels(e.ObjectNew.GetLabels(), r.ShardKeys))
		},
	}
}

// bindingsOfStorageClass maps a StorageClass to the bindings that record it.
func (r *Reconciler) bindingsOfStorageClass(ctx context.Context, class client.Object) []reconcile.Request {
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.client.List(ctx, &bindings); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the bindings of a StorageClass", "storageClass", class.GetName())
		return nil
	}
	var requests []reconcile.Request
	for i := range bindings.Items {
		name := bindings.Items[i].Spec.Decision.StorageClassName
		if name == class.GetName() || (name == "" && class.GetAnnotations()[ledger.DefaultStorageClassAnnotation] == "true") {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&bindings.Items[i])})
		}
	}
	return requests
}
