package controller

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/controller/diagnose"
	"github.com/embedops/embedops/internal/decision"
)

// A storage change rolls: the server's pods mount their cache through the
// StatefulSet's claim templates or pod template, and claim templates cannot
// change in place. So a new storage gets a StatefulSet of its own beside the
// one serving, both selected by the server's Services and budget, and
// decision.PlanRollout moves the replicas over, surge first. The old
// StatefulSets stay in the inventory until they are deleted, and their
// bindings stay referenced until no pod mounts their storage.

// storageLabelOf is the storage a pod template mounts: its cache-binding
// label, "" for an emptyDir cache.
func storageLabelOf(template *corev1.PodTemplateSpec) string {
	return template.Labels[embedopsv1.CacheBindingLabel]
}

// statefulSetNameFor names the StatefulSet that runs the desired pod
// template: a PerReplica binding's recorded one (its claims carry the
// name), else the server's StatefulSet that already mounts the same
// storage, else the server's name while no StatefulSet has it, else the
// storage's own (decision.RolloutStatefulSetName).
func statefulSetNameFor(server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, cache *builder.Cache, storage string, sets []appsv1.StatefulSet) string {
	if cache != nil && cache.Mode == embedopsv1.CacheModePerReplica && binding != nil {
		return decision.StatefulSetNameFor(binding, server.Name)
	}
	for i := range sets {
		if sets[i].DeletionTimestamp.IsZero() && storageLabelOf(&sets[i].Spec.Template) == storage {
			return sets[i].Name
		}
	}
	if !slices.ContainsFunc(sets, func(sts appsv1.StatefulSet) bool { return sts.Name == server.Name }) {
		return server.Name
	}
	return decision.RolloutStatefulSetName(server.Name, storage)
}

// confirmFree checks, uncached, that the name a storage the cache shows no
// StatefulSet of is about to be given is free: a StatefulSet created a
// moment ago under the server's name may not be cached yet, and applying
// the new storage onto it would replace its pods in place; and another
// object (another server may be named <server>-<6 hex>) may hold a
// rollout name, onto which the apply would fail at every reconcile. The
// storage then takes the next free rollout name (decision.FreeRolloutName,
// the ledger's rule for PerReplica bindings). Reads only when a
// StatefulSet is about to be created.
func (r *EmbeddingServerReconciler) confirmFree(ctx context.Context, server *embedopsv1.EmbeddingServer, name, storage string, sets []appsv1.StatefulSet) (string, error) {
	if slices.ContainsFunc(sets, func(sts appsv1.StatefulSet) bool { return sts.Name == name }) {
		return name, nil
	}
	if name == server.Name {
		free, err := r.nameFree(ctx, server, name, nil)
		if err != nil || free {
			return name, err
		}
	}
	return decision.FreeRolloutName(server.Name, storage, func(candidate string) (bool, error) {
		return r.nameFree(ctx, server, candidate, sets)
	})
}

// nameFree reports, uncached, whether name is free for a new storage: no
// StatefulSet holds it, or, for a rollout name, one with this server's
// owner labels that the cache does not show yet. The server's own name
// held by anything is not free, nor is a name among sets (the server's
// StatefulSets of other storage).
func (r *EmbeddingServerReconciler) nameFree(ctx context.Context, server *embedopsv1.EmbeddingServer, name string, sets []appsv1.StatefulSet) (bool, error) {
	if slices.ContainsFunc(sets, func(sts appsv1.StatefulSet) bool { return sts.Name == name }) {
		return false, nil
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: server.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading StatefulSet %s: %w", name, err)
	}
	return name != server.Name && ownershipConflict(server, existing) == "", nil
}

// storageRollout is a storage change in progress: the step taken and the
// old StatefulSets it drains.
type storageRollout struct {
	step decision.RolloutStep
	old  []appsv1.StatefulSet
}

// planStorageRollout sets the replicas the desired StatefulSet asks for
// while old StatefulSets of the server still exist, and remembers the step
// for its drains (planChildren); nil when there are none.
func planStorageRollout(scope *serverScope, desired *unstructured.Unstructured) *storageRollout {
	var old []appsv1.StatefulSet
	next := decision.SetReplicas{Name: desired.GetName()}
	for _, sts := range scope.statefulSets {
		if sts.Name == desired.GetName() {
			next.Replicas, next.Ready = replicasOf(&sts), sts.Status.ReadyReplicas
			continue
		}
		old = append(old, sts)
	}
	if len(old) == 0 {
		return nil
	}
	ordinals := make([]decision.OldReplicas, 0, len(old))
	for i := range old {
		if old[i].DeletionTimestamp.IsZero() {
			ordinals = append(ordinals, oldReplicasOf(&old[i], scope.observed.pods))
		}
	}
	step := decision.PlanRollout(scope.server.GetReplicas(), surgeOf(scope.server), builder.AllowedUnavailable(scope.server), next, ordinals)
	_ = unstructured.SetNestedField(desired.Object, int64(step.Next), "spec", "replicas")
	return &storageRollout{step: step, old: old}
}

// replicasOf is a StatefulSet's spec.replicas, defaulted to 1 as the API
// server does (k8s pkg/apis/apps/v1/defaults.go).
func replicasOf(sts *appsv1.StatefulSet) int32 {
	if sts.Spec.Replicas == nil {
		return 1
	}
	return *sts.Spec.Replicas
}

// surgeOf is how many new pods a storage change starts beyond the
// server's replicas: spec.rollout.maxSurge (decision.MaxSurge); unset, as
// many as the disruption budget lets be unavailable, at least one. 0
// replaces the pods in place (decision.PlanRollout).
func surgeOf(server *embedopsv1.EmbeddingServer) int32 {
	if surge, set := decision.MaxSurge(server); set {
		return surge
	}
	return max(builder.AllowedUnavailable(server), 1)
}

// drains are what the step does to each old StatefulSet
// (decision.DrainOld); none when no storage change is in progress.
func (rollout *storageRollout) drains() []decision.Drain {
	if rollout == nil {
		return nil
	}
	old := make([]decision.OldSet, 0, len(rollout.old))
	for i := range rollout.old {
		sts := &rollout.old[i]
		old = append(old, decision.OldSet{Name: sts.Name, Start: startOrdinalOf(sts), Replicas: replicasOf(sts), PodsGone: podsGone(sts), Deleting: !sts.DeletionTimestamp.IsZero()})
	}
	return decision.DrainOld(rollout.step, old)
}

// drainOldStatefulSets carries out the planned drains: each old
// StatefulSet scaled down to what the step lets it keep, deleted once it
// keeps none and its pods are gone, and listed in the inventory while it
// stays, so pruning and the server's deletion find it.
func (r *EmbeddingServerReconciler) drainOldStatefulSets(ctx context.Context, scope *serverScope, drains []decision.Drain) error {
	for _, drain := range drains {
		sts := scope.rollout.oldSet(drain.Name)
		had := replicasOf(sts)
		if err := r.carryOutDrain(ctx, sts, drain); err != nil {
			return err
		}
		if drain.GivesUp > 0 && surgeOf(scope.server) == 0 {
			r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, embedopsv1.MovingToNewStorageReason, "Rollout",
				"StatefulSet %s gives up %d of its %d replicas before StatefulSet %s starts theirs: %s",
				sts.Name, drain.GivesUp, had, scope.statefulSetName, howPodsMove(scope.server))
		}
		if !drain.Delete {
			entry := inventoryRef(sts.Namespace, sts.Name, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
			scope.server.Status.Inventory.Entries = mergeEntries(scope.server.Status.Inventory.Entries, []embedopsv1.ResourceRef{entry})
		}
	}
	return nil
}

// oldSet is the old StatefulSet named name, which a drain names.
func (rollout *storageRollout) oldSet(name string) *appsv1.StatefulSet {
	for i := range rollout.old {
		if rollout.old[i].Name == name {
			return &rollout.old[i]
		}
	}
	return nil
}

// carryOutDrain deletes or scales an old StatefulSet as drain says, with
// its UID as precondition, so a StatefulSet made since under the same
// name is kept; one already gone is done.
func (r *EmbeddingServerReconciler) carryOutDrain(ctx context.Context, sts *appsv1.StatefulSet, drain decision.Drain) error {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case drain.Delete:
		if err := r.act.Delete(ctx, sts, sts.UID); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the old StatefulSet %s: %w", sts.Name, err)
		}
		log.Info("deleted the old StatefulSet: its pods are gone and the new storage serves", "statefulSet", sts.Name)
	case drain.ScaleTo != nil:
		if err := r.act.MergePatch(ctx, sts, drainPatch(sts, drain)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("scaling the old StatefulSet %s to %d: %w", sts.Name, *drain.ScaleTo, err)
		}
		log.Info("scaled the old StatefulSet down: new pods serve in place of its pods", "statefulSet", sts.Name, "replicas", *drain.ScaleTo, "ordinalsStart", drain.StartAt)
	}
	return nil
}

// drainPatch is the merge patch that scales an old StatefulSet as drain
// says, with its UID as precondition: spec.replicas, and
// spec.ordinals.start when its lowest ordinals go (apps/v1
// StatefulSetOrdinals, GA in Kubernetes 1.31, below the floor
// kubeversion.Floor). It also pauses the StatefulSet's own rolling update
// (rollingUpdate.partition above every ordinal): an old StatefulSet whose
// template changed in place before the server moved away (a revision that
// ran out of room on its claims) would otherwise replace its ready pods
// with ones of the new template as soon as a trim took its unready pod out
// of range and so freed the update's maxUnavailable (kubernetes v1.37.2
// pkg/controller/statefulset/stateful_set_control.go,
// updateStatefulSetAfterInvariantEstablished). The builder applies
// partition 0, so a StatefulSet that is the server's again rolls.
func drainPatch(sts *appsv1.StatefulSet, drain decision.Drain) []byte {
	pause := fmt.Sprintf(`"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":%d}}`, math.MaxInt32)
	if drain.StartAt != nil {
		return fmt.Appendf(nil, `{"metadata":{"uid":%q},"spec":{"replicas":%d,"ordinals":{"start":%d},%s}}`, sts.UID, *drain.ScaleTo, *drain.StartAt, pause)
	}
	return fmt.Appendf(nil, `{"metadata":{"uid":%q},"spec":{"replicas":%d,%s}}`, sts.UID, *drain.ScaleTo, pause)
}

// podsGone reports whether the StatefulSet controller, having seen the
// StatefulSet's current spec, counts no pod of it: status.replicas counts
// every pod it created that still exists, terminating ones included
// (kubernetes v1.37.2 pkg/controller/statefulset/stateful_set_control.go,
// computeReplicaStatus). Its status update wakes the server (Owns).
func podsGone(sts *appsv1.StatefulSet) bool {
	return sts.Status.ObservedGeneration >= sts.Generation && sts.Status.Replicas == 0
}

// storagesInUse are the storages the server's old StatefulSets and any of
// its pods still mount: their bindings are not left until those are gone.
func storagesInUse(scope *serverScope) []string {
	var inUse []string
	for i := range scope.statefulSets {
		inUse = append(inUse, storageLabelOf(&scope.statefulSets[i].Spec.Template))
	}
	for i := range scope.observed.pods {
		inUse = append(inUse, scope.observed.pods[i].Labels[embedopsv1.CacheBindingLabel])
	}
	// The binding in use keeps its own storage; a binding it superseded,
	// of the same storage, is handed over rather than left (ledger.Leave).
	current := ""
	if scope.binding != nil {
		current = decision.StorageName(scope.binding)
	}
	slices.Sort(inUse)
	return slices.DeleteFunc(slices.Compact(inUse), func(s string) bool { return s == "" || s == current })
}

// whyNewStorage says why the pods move to new volumes, from the decisions
// of the binding in use and of a binding of an old StatefulSet's storage,
// read from the cache; "" when none is known.
func (r *EmbeddingServerReconciler) whyNewStorage(ctx context.Context, scope *serverScope) string {
	if scope.binding == nil || scope.rollout == nil {
		return ""
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.client.List(ctx, &bindings, client.InNamespace(scope.server.Namespace)); err != nil {
		return ""
	}
	for _, old := range scope.rollout.old {
		storage := storageLabelOf(&old.Spec.Template)
		if why := outOfRoomWhy(bindings.Items, storage); why != "" {
			return why
		}
		for i := range bindings.Items {
			if storage != "" && decision.StorageName(&bindings.Items[i]) == storage {
				return decision.WhyNewStorage(decision.Recorded(&bindings.Items[i]), decision.Recorded(scope.binding))
			}
		}
	}
	return "cache mode None replaces an emptyDir"
}

// reportNewStorage tells, in an event, that the pods move to a new
// StatefulSet on new volumes and why; called when that StatefulSet is
// created.
func (r *EmbeddingServerReconciler) reportNewStorage(ctx context.Context, scope *serverScope) {
	why := r.whyNewStorage(ctx, scope)
	if why == "" {
		why = "the cache decision changed"
	}
	r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, embedopsv1.MovingToNewStorageReason, "Rollout",
		"moving %d replicas to new volumes on StatefulSet %s, %s: %s",
		scope.server.GetReplicas(), scope.statefulSetName, howPodsMove(scope.server), why)
}

// howPodsMove says how a storage change moves the pods: beside the serving
// ones, or in place (spec.rollout.maxSurge: 0), which for one replica is an
// outage the user chose.
func howPodsMove(server *embedopsv1.EmbeddingServer) string {
	switch {
	case surgeOf(server) > 0:
		return "one at a time beside the serving ones"
	case server.GetReplicas() == 1:
		return "in place (spec.rollout.maxSurge: 0): the only replica stops before its successor starts, so the server serves nothing until the new pod is ready"
	}
	return fmt.Sprintf("in place (spec.rollout.maxSurge: 0): an old pod that does not serve goes first, and a ready one stops before its successor starts "+
		"only while %d of the %d replicas stay ready (the disruption budget's maxUnavailable, at least one)",
		max(server.GetReplicas()-max(builder.AllowedUnavailable(server), 1), 0), server.GetReplicas())
}

// reportHold is Ready while a storage change waits on an old pod that does
// not serve (decision.RolloutHold): the rollout's message and the hold's,
// and a Warning event when the hold is new.
func (r *EmbeddingServerReconciler) reportHold(scope *serverScope, held *decision.RolloutHold, rollout string) availability {
	message := rollout + "; " + held.Message()
	if scope.readyBefore == nil || scope.readyBefore.Reason != embedopsv1.RolloutWaitingForUnreadyReason {
		r.events.Eventf(scope.server, nil, corev1.EventTypeWarning, embedopsv1.RolloutWaitingForUnreadyReason, "Rollout", "%s", held.Message())
	}
	return availability{false, embedopsv1.RolloutWaitingForUnreadyReason, message}
}

// rolloutMessage says why the pods move to new volumes and how far they
// are, for Ready.
func rolloutMessage(why string, scope *serverScope, next *appsv1.StatefulSet) string {
	ready := int32(0)
	if next != nil {
		ready = next.Status.ReadyReplicas
	}
	var old []string
	for _, sts := range scope.rollout.old {
		old = append(old, fmt.Sprintf("%s (%d ready)", sts.Name, sts.Status.ReadyReplicas))
	}
	if why != "" {
		why = " (" + why + ")"
	}
	serving := strings.Join(old, ", ")
	if surgeOf(scope.server) == 0 {
		serving += "; " + howPodsMove(scope.server)
	}
	return fmt.Sprintf("moving to new cache storage%s: %d/%d replicas of StatefulSet %s ready; serving meanwhile: %s",
		why, ready, scope.server.GetReplicas(), scope.statefulSetName, serving)
}

// surgeAdvice is what an unschedulable pod of a storage change's new
// StatefulSet adds to Ready's message while the old pods all still run: on
// a full cluster (every GPU taken) such a surge pod never finds room, and
// the move never finishes until the pods are replaced in place instead.
// The wait stays progress until spec.progressDeadline, as every diagnosed
// wait is.
func surgeAdvice(scope *serverScope, found *diagnose.Diagnosis) string {
	if scope.rollout == nil || scope.rollout.step.Done() || found.Reason != embedopsv1.UnschedulableReason ||
		!isPodOf(found.Message, scope.statefulSetName) || surgeOf(scope.server) == 0 {
		return ""
	}
	return fmt.Sprintf("; it is a surge pod of the new storage, which waits for room beside the %d serving ones: "+
		"set spec.rollout.maxSurge: 0 to replace the pods in place instead", scope.server.GetReplicas())
}

// isPodOf reports whether a diagnosis message ("pod <name>: ...") names a
// pod of StatefulSet statefulSet, "<statefulSet>-<ordinal>".
func isPodOf(message, statefulSet string) bool {
	rest, ok := strings.CutPrefix(message, "pod "+statefulSet+"-")
	if !ok {
		return false
	}
	ordinal, _, ok := strings.Cut(rest, ":")
	_, err := strconv.Atoi(ordinal)
	return ok && err == nil
}
