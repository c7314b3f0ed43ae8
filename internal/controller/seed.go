package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// Reasons of the seed events.
const (
	// SeedingReplicaReason: a new replica's claim is a clone of a populated one.
	SeedingReplicaReason = "SeedingReplica"
	// SeedFallbackReason: a copy was abandoned and the replica downloads.
	SeedFallbackReason = "SeedFallback"
	// HoldingReplicasReason: a Clone server's new replicas wait for a
	// populated claim to copy.
	HoldingReplicasReason = "HoldingReplicas"
)

// seedWrite is what the act step writes for the claims of new replicas:
// the clones to create from the StatefulSet's claim template, the
// abandoned clones to delete, and the binding's records of both.
type seedWrite struct {
	template corev1.PersistentVolumeClaim
	selector map[string]string
	plan     decision.SeedPlan
	// snapshotClass is the VolumeSnapshotClass of a snapshot to take;
	// snapshot is the binding's, as read (nil when it does not exist).
	snapshotClass string
	snapshot      *snapshotv1.VolumeSnapshot
	// holding is the event that says the StatefulSet is held, "" for none.
	holding string
}

// planSeeds decides how the claims of the StatefulSet's new replicas are
// filled (decision.PlanSeeds) for a PerReplica cache with a populator,
// once the binding recorded its commit, and holds the built StatefulSet's
// replicas while no claim is populated yet (not during a storage rollout,
// whose step sets them). Nil when there is nothing to write; the duration
// is when a copy still unbound reaches its deadline.
func (r *EmbeddingServerReconciler) planSeeds(ctx context.Context, scope *serverScope) (*seedWrite, time.Duration, error) {
	cache, binding := scope.cache, scope.binding
	if cache == nil || binding == nil || cache.Mode != embedopsv1.CacheModePerReplica || cache.Existing || cache.PopulatorImage == "" ||
		scope.server.Spec.Cache.Seed == embedopsv1.CacheSeedDownload || recordedCommit(binding) == "" {
		// Nothing to plan: spare the conversion of the built StatefulSet.
		return nil, 0, nil
	}
	set := &appsv1.StatefulSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(scope.children[0].Object, set); err != nil {
		return nil, 0, fmt.Errorf("reading the built StatefulSet: %w", err)
	}
	if len(set.Spec.VolumeClaimTemplates) == 0 || set.Spec.Replicas == nil {
		return nil, 0, nil
	}
	write := &seedWrite{template: set.Spec.VolumeClaimTemplates[0]}
	names := decision.PerReplicaClaimNames(write.template.Name, set.Name, *set.Spec.Replicas)
	in := decision.SeedInput{
		Seed:   scope.server.Spec.Cache.Seed,
		Commit: recordedCommit(binding),
		Names:  names,
		Claims: r.seedClaimsOf(scope.observed, binding, write.template.Name, names),
		Fills:  binding.Status.ClaimFills,
		Hold:   scope.rollout == nil,
		Now:    r.now(),
	}
	if err := r.resolveCopies(ctx, scope, &in, write); err != nil {
		return nil, 0, err
	}
	write.plan = decision.PlanSeeds(in)
	held := write.plan.Replicas >= 0 && write.plan.Replicas < *set.Spec.Replicas
	if held {
		if err := unstructured.SetNestedField(scope.children[0].Object, int64(write.plan.Replicas), "spec", "replicas"); err != nil {
			return nil, 0, fmt.Errorf("holding the StatefulSet's replicas: %w", err)
		}
	}
	if set.Spec.Selector != nil {
		write.selector = set.Spec.Selector.MatchLabels
	}
	if held && newHold(scope.observed.statefulSet(set.Name), write.plan.Replicas) {
		write.holding = fmt.Sprintf("Replicas %d to %d start once a claim is populated, as copies of it (spec.cache.seed %s); %d of %d meanwhile",
			write.plan.Replicas, *set.Spec.Replicas-1, scope.server.Spec.Cache.Seed, write.plan.Replicas, *set.Spec.Replicas)
	}
	plan := write.plan
	if plan.Snapshot == nil && len(plan.Clones) == 0 && len(plan.Abandon) == 0 && len(plan.Fills) == 0 && write.holding == "" {
		return nil, plan.Recheck, nil
	}
	return write, plan.Recheck, nil
}

// resolveCopies completes the seed input with how a copy is made and the
// binding's snapshot, read only while an ordinal lacks its claim, a
// restore waits, or a Snapshot server's snapshot is due (snapshotDue): a
// server whose claims all exist costs no read.
func (r *EmbeddingServerReconciler) resolveCopies(ctx context.Context, scope *serverScope, in *decision.SeedInput, write *seedWrite) error {
	if !missingOrRestoring(in) && !snapshotDue(in, scope.binding) {
		return nil
	}
	resolved, err := r.resolveSeedCopy(ctx, scope.server, scope.binding)
	if err != nil {
		return err
	}
	in.Copy, write.snapshotClass = resolved.SeedCopy, resolved.snapshotClass
	if resolved.Method != embedopsv1.ClaimFilledBySnapshot && !restoring(in) {
		return nil
	}
	in.Snapshot, write.snapshot, err = r.seedSnapshotOf(ctx, scope.binding, in.Commit)
	return err
}

// snapshotDue reports whether a server that takes its snapshot ahead
// (decision.SnapshotAhead) has a populated claim and no snapshot recorded
// at the binding's commit.
func snapshotDue(in *decision.SeedInput, binding *embedopsv1.ModelCacheBinding) bool {
	if !decision.SnapshotAhead(in.Seed) || slices.Contains(binding.Spec.Resources.VolumeSnapshotNames, decision.SnapshotName(binding.Name, in.Commit)) {
		return false
	}
	for _, claim := range in.Claims {
		if claim.Populated {
			return true
		}
	}
	return false
}

// missingOrRestoring reports whether an ordinal lacks its claim or a
// restore is not bound yet.
func missingOrRestoring(in *decision.SeedInput) bool {
	for _, name := range in.Names {
		if _, exists := in.Claims[name]; !exists {
			return true
		}
	}
	return restoring(in)
}

// restoring reports whether a restore of a snapshot is not bound yet.
func restoring(in *decision.SeedInput) bool {
	for _, claim := range in.Claims {
		if claim.CopyMethod == embedopsv1.ClaimFilledBySnapshot && !claim.Bound {
			return true
		}
	}
	return false
}

// newHold reports whether holding at replicas changes what the live
// StatefulSet asks for: the event says so once, not every reconcile.
func newHold(live *appsv1.StatefulSet, replicas int32) bool {
	return live == nil || live.Spec.Replicas == nil || *live.Spec.Replicas != replicas
}

// recordedCommit is the commit the binding recorded (its resolve Job's,
// before any replica reported a digest), "" for none.
func recordedCommit(binding *embedopsv1.ModelCacheBinding) string {
	if binding.Status.Realized == nil {
		return ""
	}
	return binding.Status.Realized.ResolvedCommit
}

// seedClaimsOf is what the seed plan knows of the binding's claims and of
// the claims of the StatefulSet's ordinals that exist: bound, being
// deleted, cloned from which claim and handed to its provisioner since
// when (provisioningSince), and populated when the pod of its ordinal
// reported the binding's commit and digest.
func (r *EmbeddingServerReconciler) seedClaimsOf(seen *observed, binding *embedopsv1.ModelCacheBinding, template string, names []string) map[string]decision.SeedClaim {
	populated := populatedClaims(seen.pods, binding, template)
	claims := map[string]decision.SeedClaim{}
	for _, name := range slices.Concat(names, binding.Spec.Resources.PersistentVolumeClaimNames) {
		claim, ok := seen.claims[name]
		if !ok {
			continue
		}
		state := decision.SeedClaim{
			Name:      name,
			Bound:     claim.Status.Phase == corev1.ClaimBound,
			Deleting:  claim.DeletionTimestamp != nil,
			Populated: populated[name],
		}
		if method := copyMethodOf(claim.Spec.DataSourceRef); method != "" {
			state.CopyOf, state.CopyMethod = claim.Spec.DataSourceRef.Name, method
			state.Provisioning = r.provisioningSince(claim, state.Bound)
		}
		claims[name] = state
	}
	return claims
}

// copyMethodOf is Clone for a dataSourceRef naming a claim, Snapshot for
// one naming a VolumeSnapshot, "" for none or another kind.
func copyMethodOf(ref *corev1.TypedObjectReference) embedopsv1.ClaimFillMethod {
	switch {
	case ref == nil || (ref.Namespace != nil && *ref.Namespace != ""):
		// None, or another namespace's source: not a copy embedops made.
		return ""
	case ref.Kind == "PersistentVolumeClaim" && (ref.APIGroup == nil || *ref.APIGroup == ""):
		return embedopsv1.ClaimFilledByClone
	case ref.Kind == "VolumeSnapshot" && ref.APIGroup != nil && *ref.APIGroup == snapshotv1.GroupName:
		return embedopsv1.ClaimFilledBySnapshot
	}
	return ""
}

// provisionerAnnotations are what kube-controller-manager's PV controller
// writes on a claim it hands to an external provisioner (kubernetes v1.37.2
// pkg/controller/volume/persistentvolume/pv_controller.go,
// setClaimProvisioner): for a WaitForFirstConsumer class only once the
// scheduler chose a node.
var provisionerAnnotations = []string{"volume.kubernetes.io/storage-provisioner", "volume.beta.kubernetes.io/storage-provisioner"}

// provisioningSince is when this process first saw the clone handed to its
// provisioner, zero while it is not. The API keeps no such time (the
// cache strips managed fields), so a restarted controller starts the
// clock again: a later fallback, never an earlier one.
func (r *EmbeddingServerReconciler) provisioningSince(claim *corev1.PersistentVolumeClaim, bound bool) time.Time {
	if bound {
		r.provisioning.Delete(claim.UID)
		return time.Time{}
	}
	for _, key := range provisionerAnnotations {
		if claim.Annotations[key] != "" {
			since, _ := r.provisioning.LoadOrStore(claim.UID, r.now())
			return since.(time.Time)
		}
	}
	return time.Time{}
}

// populatedClaims are the claims whose pods, of the binding's storage,
// reported the recorded commit and digest from their populate init
// containers. A StatefulSet names a pod's claim <template>-<pod> (kubernetes
// v1.37.2 pkg/controller/statefulset/stateful_set_utils.go,
// getPersistentVolumeClaimName); the cache keeps no pod volumes.
func populatedClaims(pods []corev1.Pod, binding *embedopsv1.ModelCacheBinding, template string) map[string]bool {
	populated := map[string]bool{}
	recorded := binding.Status.Realized
	if recorded == nil || recorded.ContentDigest == "" {
		return populated
	}
	storage := decision.StorageName(binding)
	for i := range pods {
		if pods[i].Labels[embedopsv1.CacheBindingLabel] != storage {
			continue
		}
		outcome, ok := populateOutcomeOf(&pods[i])
		if ok && outcome.done && outcome.result.ResolvedCommit == recorded.ResolvedCommit && outcome.result.ContentDigest == recorded.ContentDigest {
			populated[template+"-"+pods[i].Name] = true
		}
	}
	return populated
}

// carryOutSeeds takes the binding's snapshot when the plan needs one,
// records the planned fills on the binding, then creates the planned
// copies before the StatefulSet reaches their ordinals and deletes
// abandoned copies that never bound, with an event each.
func (r *EmbeddingServerReconciler) carryOutSeeds(ctx context.Context, scope *serverScope, write *seedWrite) error {
	if write == nil {
		return nil
	}
	if write.holding != "" {
		r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, HoldingReplicasReason, "Seed", "%s", write.holding)
	}
	if err := r.takeSnapshot(ctx, scope, write); err != nil {
		return err
	}
	// Recorded first: a record without its claim is made again, a claim
	// without its record could be copied again after a download.
	if err := r.ledger.RecordClaimFills(ctx, scope.binding, write.plan.Fills); err != nil {
		return err
	}
	r.reportRefusals(scope, write.plan)
	for _, abandon := range write.plan.Abandon {
		if err := r.abandonClone(ctx, scope.server.Namespace, abandon.Name); err != nil {
			return err
		}
		r.events.Eventf(scope.server, nil, corev1.EventTypeWarning, SeedFallbackReason, "Seed",
			"Replica claim %s downloads from the hub: %s", abandon.Name, abandon.Why)
	}
	var copied []string
	for _, clone := range write.plan.Clones {
		claim := copyClaim(write, scope.server.Namespace, clone, r.sourceSize(scope.observed, write, clone))
		if err := r.act.CreateClaim(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating claim %s from %s: %w", clone.Name, clone.Source, err)
		}
		copied = append(copied, clone.Name)
	}
	if len(copied) > 0 {
		r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, SeedingReplicaReason, "Seed",
			"Claims %s are %s, populated at commit %s", strings.Join(copied, ", "), copiedFrom(write.plan.Clones[0]), recordedCommit(scope.binding))
	}
	return nil
}

// reportRefusals emits a Warning for each new claim that downloads because
// no copy could be made (a fill with a reason and no source).
func (r *EmbeddingServerReconciler) reportRefusals(scope *serverScope, plan decision.SeedPlan) {
	for _, fill := range plan.Fills {
		if fill.Fallback != "" && fill.Source == "" {
			r.events.Eventf(scope.server, nil, corev1.EventTypeWarning, SeedFallbackReason, "Seed",
				"Replica claim %s downloads from the hub: %s", fill.Name, fill.Fallback)
		}
	}
}

// copiedFrom says what a copy is made from, for an event.
func copiedFrom(clone decision.SeedClone) string {
	if clone.Method == embedopsv1.ClaimFilledBySnapshot {
		return "restores of VolumeSnapshot " + clone.Source
	}
	return "clones of claim " + clone.Source
}

// copyClaim is the claim the StatefulSet controller would create for the
// ordinal (its template's labels and the StatefulSet's selector: kubernetes
// v1.37.2 pkg/controller/statefulset/stateful_set_utils.go,
// getPersistentVolumeClaims), with a dataSourceRef naming the source and a
// request of at least size. external-provisioner v6.3.0
// (pkg/controller/controller.go) clones a claim of the same namespace,
// StorageClass and CSI driver once it is bound, of a request at least the
// source's capacity (getPVCSource), and restores a VolumeSnapshot once it
// is readyToUse, of a request at least its restoreSize
// (getSnapshotSource).
func copyClaim(write *seedWrite, namespace string, clone decision.SeedClone, size resource.Quantity) *corev1.PersistentVolumeClaim {
	claim := &corev1.PersistentVolumeClaim{}
	claim.Namespace, claim.Name = namespace, clone.Name
	claim.Labels = map[string]string{}
	for k, v := range write.template.Labels {
		claim.Labels[k] = v
	}
	for k, v := range write.selector {
		claim.Labels[k] = v
	}
	claim.Spec = *write.template.Spec.DeepCopy()
	claim.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: clone.Source}
	if clone.Method == embedopsv1.ClaimFilledBySnapshot {
		group := snapshotv1.GroupName
		claim.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: clone.Source}
	}
	if request := claim.Spec.Resources.Requests[corev1.ResourceStorage]; request.Cmp(size) < 0 {
		claim.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: size}
	}
	return claim
}

// sourceSize is the size a copy needs: the source claim's capacity, or
// the snapshot's restoreSize; zero when unknown. A source grown past the
// binding's size (a manual expansion) is copied whole, not refused.
func (r *EmbeddingServerReconciler) sourceSize(seen *observed, write *seedWrite, clone decision.SeedClone) resource.Quantity {
	if clone.Method == embedopsv1.ClaimFilledBySnapshot {
		if write.snapshot != nil && write.snapshot.Status != nil && write.snapshot.Status.RestoreSize != nil {
			return *write.snapshot.Status.RestoreSize
		}
		if source, ok := seen.claims[write.snapshotSource()]; ok {
			return source.Status.Capacity[corev1.ResourceStorage]
		}
		return resource.Quantity{}
	}
	if source, ok := seen.claims[clone.Source]; ok {
		return source.Status.Capacity[corev1.ResourceStorage]
	}
	return resource.Quantity{}
}

// abandonClone deletes a clone that never bound, read live, with the UID
// and resourceVersion it was read at: it holds no data, and the
// StatefulSet then creates an empty claim its populator fills. A clone
// that bound meanwhile is kept.
func (r *EmbeddingServerReconciler) abandonClone(ctx context.Context, namespace, name string) error {
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	if claim.Spec.VolumeName != "" || claim.Status.Phase == corev1.ClaimBound {
		return nil
	}
	err := r.act.DeleteClaimAsRead(ctx, claim)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the unbound clone %s: %w", name, err)
	}
	r.provisioning.Delete(claim.UID)
	ctrl.LoggerFrom(ctx).Info("abandoned an unbound clone", "claim", name)
	return nil
}
