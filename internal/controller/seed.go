package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// holding is the event that says the StatefulSet is held, "" for none.
	holding string
}

// planSeeds decides how the claims of the StatefulSet's new replicas are
// filled (decision.PlanSeeds) for a PerReplica cache with a populator,
// once the binding recorded its commit, and holds the built StatefulSet's
// replicas while no claim is populated yet (not during a storage rollout,
// whose step sets them). Nil when there is nothing to write; the duration
// is when a clone still unbound reaches its deadline.
func (r *EmbeddingServerReconciler) planSeeds(scope *serverScope) (*seedWrite, time.Duration, error) {
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
	template := set.Spec.VolumeClaimTemplates[0]
	names := decision.PerReplicaClaimNames(template.Name, set.Name, *set.Spec.Replicas)
	plan := decision.PlanSeeds(decision.SeedInput{
		Seed:   scope.server.Spec.Cache.Seed,
		Commit: recordedCommit(binding),
		Names:  names,
		Claims: r.seedClaimsOf(scope.observed, binding, template.Name, names),
		Fills:  binding.Status.ClaimFills,
		Hold:   scope.rollout == nil,
		Now:    r.now(),
	})
	held := plan.Replicas >= 0 && plan.Replicas < *set.Spec.Replicas
	if held {
		if err := unstructured.SetNestedField(scope.children[0].Object, int64(plan.Replicas), "spec", "replicas"); err != nil {
			return nil, 0, fmt.Errorf("holding the StatefulSet's replicas: %w", err)
		}
	}
	write := &seedWrite{template: template, plan: plan}
	if set.Spec.Selector != nil {
		write.selector = set.Spec.Selector.MatchLabels
	}
	if held && newHold(scope.observed.statefulSet(set.Name), plan.Replicas) {
		write.holding = fmt.Sprintf("Replicas %d to %d start once a claim is populated, as clones of it (spec.cache.seed Clone); %d of %d meanwhile",
			plan.Replicas, *set.Spec.Replicas-1, plan.Replicas, *set.Spec.Replicas)
	}
	if len(plan.Clones) == 0 && len(plan.Abandon) == 0 && len(plan.Fills) == 0 && write.holding == "" {
		return nil, plan.Recheck, nil
	}
	return write, plan.Recheck, nil
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
		if ref := claim.Spec.DataSourceRef; ref != nil && ref.Kind == "PersistentVolumeClaim" {
			state.CloneOf = ref.Name
			state.Provisioning = r.provisioningSince(claim, state.Bound)
		}
		claims[name] = state
	}
	return claims
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

// carryOutSeeds records the planned fills on the binding, then creates the
// planned clones before the StatefulSet reaches their ordinals and deletes
// abandoned clones that never bound, with an event each.
func (r *EmbeddingServerReconciler) carryOutSeeds(ctx context.Context, scope *serverScope, write *seedWrite) error {
	if write == nil {
		return nil
	}
	if write.holding != "" {
		r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, HoldingReplicasReason, "Seed", "%s", write.holding)
	}
	// Recorded first: a record without its claim is made again, a claim
	// without its record could be cloned again after a download.
	if err := r.ledger.RecordClaimFills(ctx, scope.binding, write.plan.Fills); err != nil {
		return err
	}
	for _, abandon := range write.plan.Abandon {
		if err := r.abandonClone(ctx, scope.server.Namespace, abandon.Name); err != nil {
			return err
		}
		r.events.Eventf(scope.server, nil, corev1.EventTypeWarning, SeedFallbackReason, "Seed",
			"Replica claim %s downloads from the hub: %s", abandon.Name, abandon.Why)
	}
	var cloned []string
	for _, clone := range write.plan.Clones {
		if err := r.act.CreateClaim(ctx, cloneClaim(write, scope.server.Namespace, clone)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating claim %s as a clone of %s: %w", clone.Name, clone.Source, err)
		}
		cloned = append(cloned, clone.Name)
	}
	if len(cloned) > 0 {
		r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, SeedingReplicaReason, "Seed",
			"Claims %s are clones of claim %s, populated at commit %s", strings.Join(cloned, ", "), write.plan.Clones[0].Source, recordedCommit(scope.binding))
	}
	return nil
}

// cloneClaim is the claim the StatefulSet controller would create for the
// ordinal (its template's labels and the StatefulSet's selector: kubernetes
// v1.37.2 pkg/controller/statefulset/stateful_set_utils.go,
// getPersistentVolumeClaims), with a dataSourceRef naming the source: CSI
// volume cloning (external-provisioner v6.3.0 pkg/controller/controller.go,
// getPVCSource: same namespace and CSI driver, the source bound, size at
// least the source's, which the template's is, being the binding's).
func cloneClaim(write *seedWrite, namespace string, clone decision.SeedClone) *corev1.PersistentVolumeClaim {
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
	return claim
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
