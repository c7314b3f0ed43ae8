package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// observed is what a reconcile reads from the informer cache, in one step
// before it writes anything (observe): the children the spec names, the
// StatefulSets and pods that carry the server's owner labels, and, unless
// the cache mode is None, the namespace's labelled claims. The phases
// decide from it: what a write of this reconcile changed is known from the
// write's answer (rollouts, scope.created), never from a cache read after
// it, which the cache would answer late.
//
// Three cached reads come later, of what no write of the reconcile
// touched before them: the ledger's reads of its bindings, the populate
// Job of the binding chosen (by name, once it is chosen: the binding is
// not known here, and listing every populate Job of the namespace at every
// reconcile would cost more), and the bindings whyNewStorage names in a
// rollout's message. What the cache cannot show is read uncached where a
// race or a missing watch needs it (the doc of this package lists those
// reads).
type observed struct {
	// statefulSets carry the server's owner labels, sorted by name; some
	// may be controlled by another object (see controlledStatefulSets).
	statefulSets []appsv1.StatefulSet
	// pods carry the server's owner labels.
	pods []corev1.Pod
	// children are the children the spec names (namedChildren) that the
	// cache holds, by inventory ID, but for StatefulSets, which are in
	// statefulSets (child finds both).
	children map[string]client.Object
	// claims are the namespace's claims embedops labels, by name; nil for
	// cache mode None.
	claims map[string]*corev1.PersistentVolumeClaim
}

// observe reads the observed snapshot of the server from the cache.
func (r *EmbeddingServerReconciler) observe(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	seen := &observed{}
	var err error
	if seen.statefulSets, err = r.observeStatefulSets(ctx, server); err != nil {
		return ctrl.Result{}, err
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(server.Namespace), ownedBy(server)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods: %w", err)
	}
	seen.pods = pods.Items
	if seen.children, err = r.observeChildren(ctx, namedChildren(server)); err != nil {
		return ctrl.Result{}, err
	}
	if server.Spec.Cache.Mode != embedopsv1.CacheModeNone {
		if seen.claims, err = r.observeClaims(ctx, server.Namespace); err != nil {
			return ctrl.Result{}, err
		}
	}
	scope.observed = seen
	return ctrl.Result{}, nil
}

// observeStatefulSets lists the StatefulSets with the server's owner
// labels from the cache, sorted by name.
func (r *EmbeddingServerReconciler) observeStatefulSets(ctx context.Context, server *embedopsv1.EmbeddingServer) ([]appsv1.StatefulSet, error) {
	var sets appsv1.StatefulSetList
	if err := r.client.List(ctx, &sets, client.InNamespace(server.Namespace), ownedBy(server)); err != nil {
		return nil, fmt.Errorf("listing the server's StatefulSets: %w", err)
	}
	slices.SortFunc(sets.Items, func(a, b appsv1.StatefulSet) int { return strings.Compare(a.Name, b.Name) })
	return sets.Items, nil
}

// observeChildren reads the children refs name from the cache, by
// inventory ID; a child the cache does not hold is left out, and so are
// StatefulSets, which observe lists.
func (r *EmbeddingServerReconciler) observeChildren(ctx context.Context, refs []embedopsv1.ResourceRef) (map[string]client.Object, error) {
	children := make(map[string]client.Object, len(refs))
	for _, ref := range refs {
		id, err := object.ParseObjMetadata(ref.ID)
		if err != nil {
			return nil, fmt.Errorf("parsing child %q: %w", ref.ID, err)
		}
		if id.GroupKind == statefulSetKind {
			continue
		}
		typed, err := r.scheme.New(id.GroupKind.WithVersion(ref.Version))
		if err != nil {
			return nil, fmt.Errorf("child %q: %w", ref.ID, err)
		}
		child := typed.(client.Object)
		err = r.client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, child)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading %s %s from the cache: %w", id.GroupKind.Kind, id.Name, err)
		}
		children[ref.ID] = child
	}
	return children, nil
}

// child is the observed child with inventory ID id: one the spec names, or
// any StatefulSet with the server's owner labels; false when the cache
// held none.
func (o *observed) child(id string) (client.Object, bool) {
	if child, ok := o.children[id]; ok {
		return child, true
	}
	meta, err := object.ParseObjMetadata(id)
	if err != nil || meta.GroupKind != statefulSetKind {
		return nil, false
	}
	if sts := o.statefulSet(meta.Name); sts != nil {
		return sts, true
	}
	return nil, false
}

// service is the observed client Service, under the server's name; nil
// when the cache held none.
func (o *observed) service(server *embedopsv1.EmbeddingServer) *corev1.Service {
	service, _ := o.children[inventoryRef(server.Namespace, server.Name, corev1.SchemeGroupVersion.WithKind("Service")).ID].(*corev1.Service)
	return service
}

// ownedBy selects the objects that carry the server's owner labels.
func ownedBy(server *embedopsv1.EmbeddingServer) client.MatchingLabels {
	return ownerLabels().GetOwnerLabels(server.Name, server.Namespace)
}

// observeClaims lists the namespace's claims embedops labels, by name.
func (r *EmbeddingServerReconciler) observeClaims(ctx context.Context, namespace string) (map[string]*corev1.PersistentVolumeClaim, error) {
	var claims corev1.PersistentVolumeClaimList
	if err := r.client.List(ctx, &claims, client.InNamespace(namespace), client.MatchingLabels{embedopsv1.NamespaceLabel: namespace}); err != nil {
		return nil, fmt.Errorf("listing claims: %w", err)
	}
	byName := make(map[string]*corev1.PersistentVolumeClaim, len(claims.Items))
	for i := range claims.Items {
		byName[claims.Items[i].Name] = &claims.Items[i]
	}
	return byName, nil
}

// statefulSet is the observed StatefulSet named name; nil when there is
// none.
func (o *observed) statefulSet(name string) *appsv1.StatefulSet {
	for i := range o.statefulSets {
		if o.statefulSets[i].Name == name {
			return &o.statefulSets[i]
		}
	}
	return nil
}

// controlledStatefulSets are the observed StatefulSets the server
// controls, sorted by name.
func (o *observed) controlledStatefulSets(server *embedopsv1.EmbeddingServer) []appsv1.StatefulSet {
	return controlledBy(server, o.statefulSets)
}

// controlledBy are copies of the StatefulSets of all the server controls,
// in order: the rollout patches them with the API server's answers, which
// must not change what was observed.
func controlledBy(server *embedopsv1.EmbeddingServer, all []appsv1.StatefulSet) []appsv1.StatefulSet {
	var sets []appsv1.StatefulSet
	for i := range all {
		if owner := metav1.GetControllerOfNoCopy(&all[i]); owner != nil && owner.UID == server.UID {
			sets = append(sets, *all[i].DeepCopy())
		}
	}
	return sets
}

// podsMounting are the observed pods that mount storage (their
// cache-binding label).
func (o *observed) podsMounting(storage string) []corev1.Pod {
	var pods []corev1.Pod
	for _, pod := range o.pods {
		if pod.Labels[embedopsv1.CacheBindingLabel] == storage {
			pods = append(pods, pod)
		}
	}
	return pods
}
