package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// deletionPlan is what the act step does for a deleted server: delete its
// children, then, once no pod of it mounts a cache, leave its bindings
// and let it go.
type deletionPlan struct {
	children []embedopsv1.ResourceRef
	release  bool
}

// reconcileDelete removes the server's children, never its cache claims,
// and, once none of its pods mounts a cache any more, its references to
// bindings, then lets the server go. Owner references would let the
// garbage collector do the same, but the finalizer makes the removal
// explicit and ordered. Like a live server's reconcile it plans, then the
// act step writes, in two rounds: the pods are looked for only once the
// children are deleted, so no pod a StatefulSet made meanwhile is missed.
func (r *EmbeddingServerReconciler) reconcileDelete(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(scope.server, embedopsv1.ServerFinalizer) {
		return ctrl.Result{}, nil
	}
	return r.runRounds(ctx, scope, [][]phase{
		{{"delete", r.planDeletion}},
		{{"release", r.planRelease}},
	}, nil)
}

// planDeletion plans the deletion of the server's children: its inventory,
// the children it always has, and every StatefulSet it controls (one a
// rollout started may be missing from the inventory, after a crash before
// the status patch).
func (r *EmbeddingServerReconciler) planDeletion(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	entries := deletableEntries(server)
	labelled, err := r.observeStatefulSets(ctx, server)
	if err != nil {
		return ctrl.Result{}, err
	}
	sets := controlledBy(server, labelled)
	for i := range sets {
		entries = mergeEntries(entries, []embedopsv1.ResourceRef{inventoryRef(sets[i].Namespace, sets[i].Name, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))})
	}
	scope.plan.deletion = &deletionPlan{children: entries}
	return ctrl.Result{}, nil
}

// planRelease plans leaving the server's bindings once no pod of it mounts
// a cache (livePodOf); until then it waits: the pods' deletions wake the
// server (it watches its pods).
func (r *EmbeddingServerReconciler) planRelease(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	pod, err := r.livePodOf(ctx, scope.server)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod != "" {
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for the pods to go before leaving their bindings", "pod", pod)
		scope.halted = true
		return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
	}
	scope.plan.deletion = &deletionPlan{release: true}
	return ctrl.Result{}, nil
}

// carryOutDeletion deletes the planned children, or leaves every binding
// of the server and removes its finalizer, which the status patch writes,
// and forgets what this process remembered of it.
func (r *EmbeddingServerReconciler) carryOutDeletion(ctx context.Context, scope *serverScope, plan *deletionPlan) error {
	server := scope.server
	if len(plan.children) > 0 {
		if err := r.deleteEntries(ctx, server, plan.children); err != nil {
			return fmt.Errorf("deleting children: %w", err)
		}
	}
	if !plan.release {
		return nil
	}
	if err := r.ledger.Leave(ctx, server, ""); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(server, embedopsv1.ServerFinalizer)
	r.ledger.ForgetServer(server)
	r.verified.forget(server.UID)
	r.upgrades.Delete(server.UID)
	r.rollouts.forget(server.UID)
	ctrl.LoggerFrom(ctx).Info("deleted children")
	return nil
}

// livePodOf names a pod of the server that mounts a cache (it carries
// embedopsv1.CacheBindingLabel), or "". A deleted server leaves its
// bindings only once it finds none, so it reads uncached: the informer
// cache may lag kube-apiserver restarts (client-go v0.37.2's reflector
// backs off for up to a minute: tools/cache/reflector.go) and miss a pod
// that mounts a claim.
func (r *EmbeddingServerReconciler) livePodOf(ctx context.Context, server *embedopsv1.EmbeddingServer) (string, error) {
	var pods corev1.PodList
	if err := r.apiReader.List(ctx, &pods, client.InNamespace(server.Namespace), client.Limit(1),
		ownedBy(server), client.HasLabels{embedopsv1.CacheBindingLabel}); err != nil {
		return "", fmt.Errorf("listing the pods of the server: %w", err)
	}
	if len(pods.Items) == 0 {
		return "", nil
	}
	return pods.Items[0].Name, nil
}

// deleteEntries deletes the objects of inventory entries that carry this
// server's owner labels; claims are skipped, and an object already gone is
// deleted. ssa's DeleteAll reads each object, then deletes it, and counts
// a NotFound between the two as a failed delete (fluxcd/pkg/ssa v0.78.0
// manager_delete.go); a Foreground cascade (Argo CD's) has the garbage
// collector deleting the same children meanwhile, so the loop is here.
func (r *EmbeddingServerReconciler) deleteEntries(ctx context.Context, server *embedopsv1.EmbeddingServer, entries []embedopsv1.ResourceRef) error {
	objects := make([]*unstructured.Unstructured, 0, len(entries))
	for _, entry := range entries {
		id, err := object.ParseObjMetadata(entry.ID)
		if err != nil {
			return fmt.Errorf("parsing inventory entry %q: %w", entry.ID, err)
		}
		if id.GroupKind == persistentVolumeClaimKind {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(id.GroupKind.WithVersion(entry.Version))
		u.SetNamespace(id.Namespace)
		u.SetName(id.Name)
		objects = append(objects, u)
	}
	sort.Sort(sort.Reverse(ssa.SortableUnstructureds(objects)))
	owned := labels.SelectorFromSet(r.act.OwnerLabels(server.Name, server.Namespace))
	var errs []error
	for _, obj := range objects {
		if err := r.deleteOwned(ctx, obj, owned); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteOwned deletes obj, read uncached, when it carries the owner labels
// owned selects; gone, it is deleted.
func (r *EmbeddingServerReconciler) deleteOwned(ctx context.Context, obj *unstructured.Unstructured, owned labels.Selector) error {
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(obj.GroupVersionKind())
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("reading %s %s: %w", obj.GetKind(), obj.GetName(), err))
	}
	if !owned.Matches(labels.Set(existing.GetLabels())) {
		return nil
	}
	if err := r.act.Delete(ctx, existing, existing.GetUID()); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// deletableEntries are the inventory entries plus the children a server
// always has, in case it is deleted before its inventory was recorded.
func deletableEntries(server *embedopsv1.EmbeddingServer) []embedopsv1.ResourceRef {
	var recorded []embedopsv1.ResourceRef
	if server.Status.Inventory != nil {
		recorded = server.Status.Inventory.Entries
	}
	return mergeEntries(recorded, expectedChildren(server))
}
