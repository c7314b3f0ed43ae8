package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

// persistentVolumeClaimKind is never pruned or deleted by a server: only a
// binding releases cache claims.
var persistentVolumeClaimKind = schema.GroupKind{Kind: "PersistentVolumeClaim"}

// statefulSetKind is the child whose rollout readiness waits for.
var statefulSetKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet").GroupKind()

// buildChildren builds the StatefulSet, Services, PodDisruptionBudget and
// NetworkPolicy with the binding's cache, and sets status.selector. A spec
// the builder refuses stalls the server as ConfigurationInvalid; nothing is
// applied and the running children are left as they are.
func (r *EmbeddingServerReconciler) buildChildren(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if scope.cache != nil {
		// Once a populator recorded the commit, TEI runs exactly it.
		scope.cache.ResolvedCommit = scope.resolvedCommit
	}
	facts, err := r.factsOf(ctx, scope)
	if err != nil {
		return ctrl.Result{}, err
	}
	statefulSet, err := builder.StatefulSet(server, scope.cache, facts)
	if err != nil {
		if errors.Is(err, builder.ErrInvalidPodTemplate) {
			return ctrl.Result{}, r.refuseSpec(scope, err)
		}
		return ctrl.Result{}, fmt.Errorf("building the StatefulSet: %w", err)
	}
	scope.statefulSets = scope.observed.controlledStatefulSets(server)
	storage := storageLabelOf(&statefulSet.Spec.Template)
	statefulSet.Name = statefulSetNameFor(server, scope.binding, scope.cache, storage, scope.statefulSets)
	if scope.cache == nil || scope.cache.Mode != embedopsv1.CacheModePerReplica {
		// A PerReplica binding's name was checked when it was made
		// (ledger placeBesideServing).
		if statefulSet.Name, err = r.confirmFree(ctx, server, statefulSet.Name, storage, scope.statefulSets); err != nil {
			return ctrl.Result{}, err
		}
	}
	scope.statefulSetName = statefulSet.Name
	if live := scope.observed.statefulSet(statefulSet.Name); live != nil {
		keepLiveSelector(statefulSet, live)
		keepLiveClaimTemplates(statefulSet, live)
		drain, liveness := keepLiveLifecycle(statefulSet, live), keepLiveLiveness(statefulSet, live)
		if drain || liveness {
			if err := r.restoreUpgrades(ctx, server, statefulSet, live, drain, liveness); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	scope.service = builder.Service(server)
	children, err := childObjects(server, desiredChildren(server, facts, statefulSet, scope.service)...)
	if err != nil {
		return ctrl.Result{}, err
	}
	scope.children = children
	return ctrl.Result{}, nil
}

// desiredChildren are the StatefulSet, the Services and, when the spec asks
// for them, the PodDisruptionBudget and the NetworkPolicy. A child that is
// not desired any more is pruned by the inventory diff.
func desiredChildren(server *embedopsv1.EmbeddingServer, facts builder.Facts, statefulSet *appsv1.StatefulSet, service *corev1.Service) []client.Object {
	children := []client.Object{statefulSet, service, builder.HeadlessService(server)}
	if budget := builder.PodDisruptionBudget(server); budget != nil {
		children = append(children, budget)
	}
	if policy := builder.NetworkPolicy(server, facts); policy != nil {
		children = append(children, policy)
	}
	return children
}

// refuseSpec marks the spec invalid and stalls the server.
func (r *EmbeddingServerReconciler) refuseSpec(scope *serverScope, err error) error {
	conditions.MarkFalse(scope.server, embedopsv1.AcceptedCondition, embedopsv1.InvalidReason, "%s", err.Error())
	return r.stall(scope, embedopsv1.ConfigurationInvalidReason, err)
}

// childObjects turns built children into what is applied: unstructured, with
// the owner labels (ssa's, embedopsv1.NameLabel and NamespaceLabel), a
// controller reference to the server, and no status or creation time.
func childObjects(server *embedopsv1.EmbeddingServer, children ...client.Object) ([]*unstructured.Unstructured, error) {
	owner := metav1.NewControllerRef(server, embedopsv1.GroupVersion.WithKind(embedopsv1.EmbeddingServerKind))
	objects := make([]*unstructured.Unstructured, 0, len(children))
	for _, child := range children {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(child)
		if err != nil {
			return nil, fmt.Errorf("converting %T %s: %w", child, child.GetName(), err)
		}
		u := &unstructured.Unstructured{Object: content}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		u.SetOwnerReferences([]metav1.OwnerReference{*owner})
		objects = append(objects, u)
	}
	ownerLabels().SetOwnerLabels(objects, server.Name, server.Namespace)
	return objects, nil
}

// ownerLabels is a resource manager used only for its owner labels; they are
// embedopsv1.NameLabel and embedopsv1.NamespaceLabel.
func ownerLabels() *ssa.ResourceManager {
	return ssa.NewResourceManager(nil, nil, ssa.Owner{Field: embedopsv1.FieldManager, Group: embedopsv1.GroupVersion.Group})
}

// checkOwnership refuses to touch a child whose name is taken by an object
// embedops does not own for this server, before any binding is made for it.
// When the cache shows every child as the last unchanged apply found it
// (childrenUnchanged), the names are ours and the check waits for
// planChildren, which makes it only if there is something to apply.
// While the cache has not shown the children the last apply created yet,
// and the spec is the one that apply handled, the reconcile stops here and
// writes nothing new: their arrival brings the server back (Owns), and
// reading them uncached meanwhile would cost a GET each and ssa's GET and
// dry run.
func (r *EmbeddingServerReconciler) checkOwnership(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	unchanged, behind, err := r.childrenUnchanged(server, scope.observed, namedChildren(server))
	if behind > 0 && server.Generation == r.verified.appliedGeneration(server.UID) {
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for the cache to show the children just created")
		scope.halted = true
		return ctrl.Result{RequeueAfter: behind}, nil
	}
	if err != nil || unchanged {
		scope.childrenVerified = unchanged
		return ctrl.Result{}, err
	}
	return r.checkOwnershipUncached(ctx, scope)
}

// checkOwnershipUncached reads the children uncached: the cache holds only
// labelled objects, and a foreign one has no labels. Since such an object
// is not watched, a conflict stalls the server and is looked at again after
// the progress interval, so the server recovers within one requeue once the
// object is gone.
// It keeps the resourceVersions it read for rememberApply.
func (r *EmbeddingServerReconciler) checkOwnershipUncached(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	scope.liveVersions, scope.absent = map[string]string{}, map[string]bool{}
	for _, entry := range namedChildren(scope.server) {
		id, err := object.ParseObjMetadata(entry.ID)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("parsing child %q: %w", entry.ID, err)
		}
		existing := &metav1.PartialObjectMetadata{}
		existing.SetGroupVersionKind(id.GroupKind.WithVersion(entry.Version))
		err = r.apiReader.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, existing)
		if apierrors.IsNotFound(err) {
			scope.absent[entry.ID] = true
			continue
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("reading %s %s: %w", id.GroupKind.Kind, id.Name, err)
		}
		scope.liveVersions[entry.ID] = existing.ResourceVersion
		if why := ownershipConflict(scope.server, existing); why != "" {
			conflict := &OwnershipConflictError{Kind: id.GroupKind.Kind, Namespace: id.Namespace, Name: id.Name, Why: why}
			r.stallAndPoll(scope, embedopsv1.OwnershipConflictReason, conflict)
			return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
		}
	}
	return ctrl.Result{}, nil
}

// recordRollout remembers the StatefulSet name just changed, so readiness
// waits until the cache has caught up with it: as the API server answered
// its creation (createChildren), else read uncached (only when it changed).
func (r *EmbeddingServerReconciler) recordRollout(ctx context.Context, scope *serverScope, name string) error {
	server := scope.server
	if created, ok := scope.created[inventoryRef(server.Namespace, name, appsv1.SchemeGroupVersion.WithKind("StatefulSet")).ID]; ok {
		r.rollouts.record(server.UID, name, appliedStatefulSet{uid: created.GetUID(), generation: created.GetGeneration()})
		return nil
	}
	applied := &metav1.PartialObjectMetadata{}
	applied.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: server.Namespace, Name: name}, applied); err != nil {
		return fmt.Errorf("reading the StatefulSet just applied: %w", err)
	}
	r.rollouts.record(server.UID, name, appliedStatefulSet{uid: applied.UID, generation: applied.Generation})
	return nil
}

// apply applies the children without recreating anything first. When the API
// server refuses a change of an immutable field (a new claim template), it
// checks that the refused object would be valid as a new one: a StatefulSet
// is returned as replaced, for replaceStatefulSet; any other child is
// applied again with force, which deletes and recreates it. An object that
// is not valid even as a new one stalls the server, so a bad spec never
// deletes a running StatefulSet.
// Children the uncached ownership check found free are created apart
// (createChildren); the others go through ssa.
func (r *EmbeddingServerReconciler) apply(ctx context.Context, scope *serverScope) (*ssa.ChangeSet, *unstructured.Unstructured, error) {
	var existing, absent []*unstructured.Unstructured
	for _, child := range scope.children {
		if scope.absent[inventoryRef(child.GetNamespace(), child.GetName(), child.GroupVersionKind()).ID] {
			absent = append(absent, child)
		} else {
			existing = append(existing, child)
		}
	}
	changes, replaced, err := r.applyExisting(ctx, scope, existing)
	if err != nil || replaced != nil {
		return changes, replaced, err
	}
	// In ssa's order (Services before the StatefulSet whose pods they name).
	sort.Sort(ssa.SortableUnstructureds(absent))
	created, err := r.createChildren(ctx, scope, absent)
	if err != nil {
		return nil, nil, err
	}
	changes.Append(created)
	return changes, nil, nil
}

// createChildren server-side applies children that the uncached ownership
// check of this reconcile found free, each in one request, without ssa's
// GET and dry run (act.Writer.CreateChild). The
// name was free when read live a moment before, as it is for ssa, whose
// own GET does not look at ownership either: a foreign object's owner
// labels are what keeps it from the cache, not from this read. The API
// server's answers are kept in scope.created.
func (r *EmbeddingServerReconciler) createChildren(ctx context.Context, scope *serverScope, children []*unstructured.Unstructured) ([]ssa.ChangeSetEntry, error) {
	entries := make([]ssa.ChangeSetEntry, 0, len(children))
	for _, child := range children {
		applied, err := r.act.CreateChild(ctx, child)
		if err != nil {
			return nil, err
		}
		if scope.created == nil {
			scope.created = map[string]*unstructured.Unstructured{}
		}
		scope.created[inventoryRef(child.GetNamespace(), child.GetName(), child.GroupVersionKind()).ID] = applied
		entries = append(entries, ssa.ChangeSetEntry{
			ObjMetadata:  object.UnstructuredToObjMetadata(child),
			GroupVersion: child.GroupVersionKind().Version,
			Subject:      fmt.Sprintf("%s/%s/%s", child.GetKind(), child.GetNamespace(), child.GetName()),
			Action:       ssa.CreatedAction,
		})
	}
	return entries, nil
}

// applyExisting applies children with ssa's drift detection.
func (r *EmbeddingServerReconciler) applyExisting(ctx context.Context, scope *serverScope, children []*unstructured.Unstructured) (*ssa.ChangeSet, *unstructured.Unstructured, error) {
	if len(children) == 0 {
		return ssa.NewChangeSet(), nil, nil
	}
	changes, err := r.act.ApplyChildren(ctx, children, false)
	var dryRun *ssaerrors.DryRunErr
	if err == nil || !errors.As(err, &dryRun) || !ssaerrors.IsImmutableError(dryRun.Unwrap()) || dryRun.InvolvedObject() == nil {
		if err != nil {
			return nil, nil, fmt.Errorf("applying children: %w", err)
		}
		return changes, nil, nil
	}
	refused := dryRun.InvolvedObject()
	if err := r.validAsNew(ctx, refused); err != nil {
		if apierrors.IsInvalid(err) {
			return nil, nil, r.refuseSpec(scope, fmt.Errorf("the API server refuses %s %s: %w", refused.GetKind(), refused.GetName(), err))
		}
		return nil, nil, fmt.Errorf("validating %s %s: %w", refused.GetKind(), refused.GetName(), err)
	}
	if refused.GroupVersionKind().GroupKind() == statefulSetKind {
		return nil, refused, nil
	}
	ctrl.LoggerFrom(ctx).Info("recreating child to change immutable fields", "kind", refused.GetKind(), "name", refused.GetName())
	changes, err = r.act.ApplyChildren(ctx, children, true)
	if err != nil {
		return nil, nil, fmt.Errorf("applying children with recreation: %w", err)
	}
	return changes, nil, nil
}

// validAsNew dry-runs the creation of a copy of obj under a generated name.
func (r *EmbeddingServerReconciler) validAsNew(ctx context.Context, obj *unstructured.Unstructured) error {
	probe := obj.DeepCopy()
	probe.SetGenerateName(obj.GetName() + "-")
	probe.SetName("")
	probe.SetResourceVersion("")
	probe.SetUID("")
	return r.act.DryRunCreate(ctx, probe)
}

// namedChildren are the children the server's spec asks for, known before
// any is built: expectedChildren, and the PodDisruptionBudget and the
// NetworkPolicy when wanted.
func namedChildren(server *embedopsv1.EmbeddingServer) []embedopsv1.ResourceRef {
	children := expectedChildren(server)
	if budget := builder.PodDisruptionBudget(server); budget != nil {
		children = append(children, inventoryRef(server.Namespace, budget.Name, policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")))
	}
	if policy := builder.NetworkPolicy(server, builder.Facts{}); policy != nil {
		children = append(children, inventoryRef(server.Namespace, policy.Name, networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")))
	}
	return children
}

// expectedChildren are the children every server has, named by the server
// alone: the StatefulSet, the Service and the headless Service.
func expectedChildren(server *embedopsv1.EmbeddingServer) []embedopsv1.ResourceRef {
	return []embedopsv1.ResourceRef{
		statefulSetRef(server),
		inventoryRef(server.Namespace, server.Name, corev1.SchemeGroupVersion.WithKind("Service")),
		inventoryRef(server.Namespace, builder.HeadlessServiceName(server), corev1.SchemeGroupVersion.WithKind("Service")),
	}
}

// statefulSetRef is the inventory entry of the StatefulSet under the
// server's own name.
func statefulSetRef(server *embedopsv1.EmbeddingServer) embedopsv1.ResourceRef {
	return inventoryRef(server.Namespace, server.Name, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
}

// inventoryOf lists applied objects in Flux's inventory shape, sorted by ID.
func inventoryOf(objects []*unstructured.Unstructured) *embedopsv1.ResourceInventory {
	entries := make([]embedopsv1.ResourceRef, 0, len(objects))
	for _, o := range objects {
		entries = append(entries, inventoryRef(o.GetNamespace(), o.GetName(), o.GroupVersionKind()))
	}
	return &embedopsv1.ResourceInventory{Entries: mergeEntries(entries, nil)}
}

// inventoryRef is one entry: ID "<namespace>_<name>_<group>_<kind>" and, as
// Flux writes it, the version without the group.
func inventoryRef(namespace, name string, gvk schema.GroupVersionKind) embedopsv1.ResourceRef {
	id := object.ObjMetadata{Namespace: namespace, Name: name, GroupKind: gvk.GroupKind()}
	return embedopsv1.ResourceRef{ID: id.String(), Version: gvk.Version}
}

// staleEntries are the entries of before that after does not list.
func staleEntries(before, after *embedopsv1.ResourceInventory) []embedopsv1.ResourceRef {
	if before == nil {
		return nil
	}
	var stale []embedopsv1.ResourceRef
	for _, entry := range before.Entries {
		if after == nil || !slices.ContainsFunc(after.Entries, func(e embedopsv1.ResourceRef) bool { return e.ID == entry.ID }) {
			stale = append(stale, entry)
		}
	}
	return stale
}

// mergeEntries is the union of two entry lists by ID, sorted by ID.
func mergeEntries(a, b []embedopsv1.ResourceRef) []embedopsv1.ResourceRef {
	merged := slices.Concat(a, b)
	slices.SortStableFunc(merged, func(x, y embedopsv1.ResourceRef) int { return strings.Compare(x.ID, y.ID) })
	return slices.CompactFunc(merged, func(x, y embedopsv1.ResourceRef) bool { return x.ID == y.ID })
}
