package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// Labels the controller sets on the bindings it creates.
const (
	// bindingServerLabel is the UID of the server that created a binding;
	// Released history is pruned per value.
	bindingServerLabel = embedopsv1.ServerUIDLabel
	// bindingBaseLabel is decision.BindingName of the binding's decision, so
	// a suffixed binding of the same decision is found by a label selector.
	bindingBaseLabel = embedopsv1.BindingBaseLabel
)

// newBindingGrace is how long a binding that was never referenced is kept
// from retiring, so its creator can add its reference even with retainFor 0.
const newBindingGrace = 30 * time.Second

// maxBindingSuffix bounds the suffixed names tried for one decision.
const maxBindingSuffix = 100

// bindingNameAt is the n-th name of a decision's binding: the base name for
// n <= 1, then base-2, base-3, ...
func bindingNameAt(base string, n int) string {
	if n <= 1 {
		return base
	}
	return base + "-" + strconv.Itoa(n)
}

// bindingSuffix is the ordinal of a binding name relative to base, 0 when
// the name is not one of base's.
func bindingSuffix(base, name string) int {
	if name == base {
		return 1
	}
	rest, ok := strings.CutPrefix(name, base+"-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 2 || strconv.Itoa(n) != rest {
		return 0
	}
	return n
}

// claimTemplateNameOf is the PerReplica claim template of a binding: the
// decision's template name plus the binding's suffix, so a binding that
// replaces a retired one never reuses its claim names.
func claimTemplateNameOf(d *decision.Decision, bindingName string) string {
	name := decision.ClaimTemplateName(d)
	if n := bindingSuffix(decision.BindingName(d), bindingName); n > 1 {
		name += "-" + strconv.Itoa(n)
	}
	return name
}

// perReplicaClaimNames are the StatefulSet claim names of ordinals below
// replicas: <template>-<statefulset>-<ordinal>.
func perReplicaClaimNames(template, statefulSet string, replicas int32) []string {
	names := make([]string, 0, max(replicas, 0))
	for i := range max(replicas, 0) {
		names = append(names, fmt.Sprintf("%s-%s-%d", template, statefulSet, i))
	}
	return names
}

// missingNames are the names of want that have does not list, in order.
func missingNames(have, want []string) []string {
	var missing []string
	for _, name := range want {
		if !slices.Contains(have, name) {
			missing = append(missing, name)
		}
	}
	return missing
}

// matchesDecision reports whether a binding records exactly the decision.
func matchesDecision(binding *embedopsv1.ModelCacheBinding, d *decision.Decision) bool {
	return binding.Spec.Identity.Key == d.Identity.Key && binding.Spec.Decision.Digest == d.Decision.Digest &&
		binding.Spec.Decision.Mode == d.Decision.Mode
}

// isActive reports whether a binding may still gain references.
func isActive(binding *embedopsv1.ModelCacheBinding) bool {
	return binding.Status.Phase == "" || binding.Status.Phase == embedopsv1.BindingActive
}

// reusable reports whether a server with decision d may reference binding.
func reusable(binding *embedopsv1.ModelCacheBinding, d *decision.Decision) bool {
	return binding.DeletionTimestamp.IsZero() && isActive(binding) && matchesDecision(binding, d)
}

// hasReference reports whether the binding lists the user with uid.
func hasReference(binding *embedopsv1.ModelCacheBinding, uid types.UID) bool {
	return slices.ContainsFunc(binding.Status.RequestReferences, func(ref embedopsv1.RequestReference) bool { return ref.UID == uid })
}

// serverReference is the reference a server adds to its binding.
func serverReference(server *embedopsv1.EmbeddingServer) embedopsv1.RequestReference {
	return embedopsv1.RequestReference{Kind: embedopsv1.EmbeddingServerKind, Namespace: server.Namespace, Name: server.Name, UID: server.UID}
}

// addReference adds ref to the binding's status and ends its idleness.
func addReference(binding *embedopsv1.ModelCacheBinding, ref embedopsv1.RequestReference) {
	binding.Status.RequestReferences = append(binding.Status.RequestReferences, ref)
	binding.Status.IdleSince, binding.Status.RetireAfter = nil, nil
}

// removeReference drops the user with uid; the last removal starts the idle
// window at now.
func removeReference(binding *embedopsv1.ModelCacheBinding, uid types.UID, now time.Time) {
	binding.Status.RequestReferences = slices.DeleteFunc(binding.Status.RequestReferences, func(ref embedopsv1.RequestReference) bool { return ref.UID == uid })
	if len(binding.Status.RequestReferences) == 0 && binding.Status.IdleSince == nil {
		markIdle(binding, now, false)
	}
}

// markIdle sets idleSince to now and retireAfter to now + retainFor; for a
// binding that was never referenced, not before its creation grace ends.
func markIdle(binding *embedopsv1.ModelCacheBinding, now time.Time, neverReferenced bool) {
	retireAfter := now.Add(binding.Spec.Decision.RetainFor.Duration)
	if neverReferenced {
		retireAfter = later(retireAfter, binding.CreationTimestamp.Add(newBindingGrace))
	}
	binding.Status.IdleSince = &metav1.Time{Time: now}
	binding.Status.RetireAfter = &metav1.Time{Time: retireAfter}
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// idleAction is what an Active binding's references call for.
type idleAction int

const (
	// stayActive: the binding is in use and not marked idle.
	stayActive idleAction = iota
	// startIdle: no references and no idle window yet.
	startIdle
	// endIdle: references are back while an idle window is recorded.
	endIdle
	// waitIdle: idle, retireAfter is still ahead.
	waitIdle
	// retireNow: idle and retireAfter has passed.
	retireNow
)

// activeAction decides what to do with an Active binding at now.
func activeAction(binding *embedopsv1.ModelCacheBinding, now time.Time) idleAction {
	idle := binding.Status.IdleSince != nil || binding.Status.RetireAfter != nil
	switch {
	case len(binding.Status.RequestReferences) > 0 && idle:
		return endIdle
	case len(binding.Status.RequestReferences) > 0:
		return stayActive
	case binding.Status.IdleSince == nil || binding.Status.RetireAfter == nil:
		return startIdle
	case !now.Before(binding.Status.RetireAfter.Time):
		return retireNow
	default:
		return waitIdle
	}
}

// untilRetirement is how long an idle binding waits before it may retire.
func untilRetirement(binding *embedopsv1.ModelCacheBinding, now time.Time) time.Duration {
	if binding.Status.RetireAfter == nil {
		return 0
	}
	return max(binding.Status.RetireAfter.Sub(now), 0)
}

// prunable are the Released bindings beyond the newest limit, oldest first.
func prunable(bindings []embedopsv1.ModelCacheBinding, limit int) []embedopsv1.ModelCacheBinding {
	var released []embedopsv1.ModelCacheBinding
	for _, b := range bindings {
		if b.Status.Phase == embedopsv1.BindingReleased && b.DeletionTimestamp.IsZero() {
			released = append(released, b)
		}
	}
	if len(released) <= limit {
		return nil
	}
	slices.SortStableFunc(released, func(a, b embedopsv1.ModelCacheBinding) int {
		return releasedTime(a).Compare(releasedTime(b))
	})
	return released[:len(released)-limit]
}

// releasedTime is when a binding was Released, or created if unrecorded.
func releasedTime(binding embedopsv1.ModelCacheBinding) time.Time {
	if binding.Status.ReleasedAt != nil {
		return binding.Status.ReleasedAt.Time
	}
	return binding.CreationTimestamp.Time
}

// drift is a difference between a binding's record and the cluster.
type drift struct {
	reason  string
	message string
}

// storageClassDrift compares the recorded cluster facts with the
// StorageClass now; facts that were not recorded cannot drift.
func storageClassDrift(binding *embedopsv1.ModelCacheBinding, provisioner string, parameters map[string]string) *drift {
	recorded := binding.Spec.Decision
	if recorded.Provisioner == "" && recorded.StorageClassParametersDigest == "" {
		return nil
	}
	if recorded.Provisioner != provisioner || recorded.StorageClassParametersDigest != decision.ParametersDigest(parameters) {
		return &drift{embedopsv1.StorageClassDriftReason, fmt.Sprintf(
			"StorageClass %q changed after the decision: provisioner %q (recorded %q), parameters digest differs: %t",
			recorded.StorageClassName, provisioner, recorded.Provisioner, recorded.StorageClassParametersDigest != decision.ParametersDigest(parameters))}
	}
	return nil
}

// claimSizeDrift reports claims whose requested size differs from the
// decision.
func claimSizeDrift(binding *embedopsv1.ModelCacheBinding, claims []corev1.PersistentVolumeClaim) *drift {
	var resized []string
	for _, claim := range claims {
		requested, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if ok && requested.Cmp(binding.Spec.Decision.Size) != 0 {
			resized = append(resized, fmt.Sprintf("%s requests %s", claim.Name, requested.String()))
		}
	}
	if len(resized) == 0 {
		return nil
	}
	return &drift{embedopsv1.ClaimResizedReason, fmt.Sprintf("claims differ from the decided size %s: %s",
		binding.Spec.Decision.Size.String(), strings.Join(resized, ", "))}
}

// cacheReadiness is the CacheReady condition a binding and its claims
// support: Bound when Active with every claim Bound, Pending otherwise.
func cacheReadiness(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) (bool, string, string) {
	if !isActive(binding) {
		return false, embedopsv1.BindingRetiringReason, fmt.Sprintf("binding %s is %s", binding.Name, binding.Status.Phase)
	}
	names := binding.Spec.Resources.PersistentVolumeClaimNames
	bound := 0
	for _, name := range names {
		if claim, ok := claims[name]; ok && claim.Status.Phase == corev1.ClaimBound {
			bound++
		}
	}
	message := fmt.Sprintf("binding %s: %d/%d claims bound", binding.Name, bound, len(names))
	if bound < len(names) {
		return false, embedopsv1.PendingReason, message
	}
	return true, embedopsv1.BoundReason, message
}

// sharedClaim is the ReadWriteMany claim of a Shared binding, controlled by
// the binding and labelled so the controller's cache sees it.
func sharedClaim(binding *embedopsv1.ModelCacheBinding, name string) *corev1.PersistentVolumeClaim {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: binding.Namespace,
			Name:      name,
			Labels:    map[string]string{embedopsv1.NameLabel: binding.Name, embedopsv1.NamespaceLabel: binding.Namespace},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(binding, embedopsv1.GroupVersion.WithKind(embedopsv1.ModelCacheBindingKind)),
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: slices.Clone(binding.Spec.Decision.AccessModes),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: binding.Spec.Decision.Size.DeepCopy()},
			},
		},
	}
	if class := binding.Spec.Decision.StorageClassName; class != "" {
		claim.Spec.StorageClassName = &class
	}
	return claim
}
