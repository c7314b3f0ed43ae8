package decision

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// MaxBindingSuffix bounds the suffixed names tried for one decision.
const MaxBindingSuffix = 100

// NewBindingGrace is how long a binding that was never referenced is kept
// from retiring, so its creator can add its reference even with retainFor 0
// (a creator that still exists keeps the binding without a phase until it
// does: the ledger's awaitsCreator).
const NewBindingGrace = 30 * time.Second

// BindingNameAt is the n-th name of a decision's binding: the base name for
// n <= 1, then base-2, base-3, ...
func BindingNameAt(base string, n int) string {
	if n <= 1 {
		return base
	}
	return base + "-" + strconv.Itoa(n)
}

// BindingSuffix is the ordinal of a binding name relative to base, 0 when
// the name is not one of base's.
func BindingSuffix(base, name string) int {
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

// ClaimTemplateNameOf is the PerReplica claim template of a binding: the
// decision's template name plus the binding's suffix, so a binding that
// replaces a retired one never reuses its claim names.
func ClaimTemplateNameOf(d *Decision, bindingName string) string {
	name := ClaimTemplateName(d)
	if n := BindingSuffix(BindingName(d), bindingName); n > 1 {
		name += "-" + strconv.Itoa(n)
	}
	return name
}

// PerReplicaClaimNames are the StatefulSet claim names of ordinals below
// replicas: <template>-<statefulset>-<ordinal>.
func PerReplicaClaimNames(template, statefulSet string, replicas int32) []string {
	names := make([]string, 0, max(replicas, 0))
	for i := range max(replicas, 0) {
		names = append(names, fmt.Sprintf("%s-%s-%d", template, statefulSet, i))
	}
	return names
}

// ClaimNamesOf are the claims a binding named name holds for a server of
// replicas replicas named server: the Shared claim named after the binding,
// or the PerReplica claims of the current replicas; none for an existing
// claim, which the binding records but does not hold.
func ClaimNamesOf(d *Decision, name, server string, replicas int32) []string {
	if d.Decision.ExistingClaim != "" {
		return nil
	}
	if d.Decision.Mode == embedopsv1.CacheModeShared {
		return []string{name}
	}
	return PerReplicaClaimNames(ClaimTemplateNameOf(d, name), server, replicas)
}

// MissingNames are the names of want that have does not list, in order.
func MissingNames(have, want []string) []string {
	var missing []string
	for _, name := range want {
		if !slices.Contains(have, name) {
			missing = append(missing, name)
		}
	}
	return missing
}

// MatchesDecision reports whether a binding records exactly the decision.
func MatchesDecision(binding *embedopsv1.ModelCacheBinding, d *Decision) bool {
	return binding.Spec.Identity.Key == d.Identity.Key && binding.Spec.Decision.Digest == d.Decision.Digest &&
		binding.Spec.Decision.Mode == d.Decision.Mode
}

// IsActive reports whether a binding may still gain references.
func IsActive(binding *embedopsv1.ModelCacheBinding) bool {
	return binding.Status.Phase == "" || binding.Status.Phase == embedopsv1.BindingActive
}

// Reusable reports whether a server with decision d may reference binding:
// Active, not being deleted, not handing its storage over, not out of room
// (OutOfRoom), recording d.
func Reusable(binding *embedopsv1.ModelCacheBinding, d *Decision) bool {
	return binding.DeletionTimestamp.IsZero() && IsActive(binding) && !HandingOver(binding) && !OutOfRoom(binding) && MatchesDecision(binding, d)
}

// Usable reports whether the server with uid may use binding for decision
// d: a binding it may newly reference (Reusable), or one it already
// references that is being deleted. Like a claim under pvc-protection, a
// deleted binding stays with the server that uses it and releases its data
// as soon as nothing does. A binding handing its storage over is not used
// again: its successor is; nor is one out of room: the server moves to
// storage of its own.
func Usable(binding *embedopsv1.ModelCacheBinding, d *Decision, uid types.UID) bool {
	if Reusable(binding, d) {
		return true
	}
	return IsActive(binding) && !HandingOver(binding) && !OutOfRoom(binding) && MatchesDecision(binding, d) && HasReference(binding, uid)
}

// AwaitsFirstReference reports whether binding is a PerReplica binding
// that the server with uid created for storage of its own, not taken over
// (no supersedes), and whose first status nobody wrote yet: its creator may
// still write its first reference (ledger's firstReferenceWait).
func AwaitsFirstReference(binding *embedopsv1.ModelCacheBinding, uid types.UID) bool {
	return binding.Status.Phase == "" && binding.DeletionTimestamp.IsZero() &&
		binding.Labels[embedopsv1.ServerUIDLabel] == string(uid) &&
		binding.Spec.Decision.Mode == embedopsv1.CacheModePerReplica && binding.Spec.Supersedes == ""
}

// HasReference reports whether the binding lists the user with uid.
func HasReference(binding *embedopsv1.ModelCacheBinding, uid types.UID) bool {
	return slices.ContainsFunc(binding.Status.RequestReferences, func(ref embedopsv1.RequestReference) bool { return ref.UID == uid })
}

// ServerReference is the reference a server adds to its binding.
func ServerReference(server *embedopsv1.EmbeddingServer) embedopsv1.RequestReference {
	return embedopsv1.RequestReference{Kind: embedopsv1.EmbeddingServerKind, Namespace: server.Namespace, Name: server.Name, UID: server.UID}
}

// AddReference adds ref to the binding's status and ends its idleness.
func AddReference(binding *embedopsv1.ModelCacheBinding, ref embedopsv1.RequestReference) {
	binding.Status.RequestReferences = append(binding.Status.RequestReferences, ref)
	binding.Status.IdleSince, binding.Status.RetireAfter = nil, nil
}

// RemoveReference drops the user with uid; the last removal starts the idle
// window at now.
func RemoveReference(binding *embedopsv1.ModelCacheBinding, uid types.UID, now time.Time) {
	binding.Status.RequestReferences = slices.DeleteFunc(binding.Status.RequestReferences, func(ref embedopsv1.RequestReference) bool { return ref.UID == uid })
	if len(binding.Status.RequestReferences) == 0 && binding.Status.IdleSince == nil {
		MarkIdle(binding, now, false)
	}
}

// MarkIdle sets idleSince to now and retireAfter to now + retainFor; for a
// binding that was never referenced, not before its creation grace ends.
func MarkIdle(binding *embedopsv1.ModelCacheBinding, now time.Time, neverReferenced bool) {
	retireAfter := now.Add(binding.Spec.Decision.RetainFor.Duration)
	if neverReferenced {
		retireAfter = later(retireAfter, binding.CreationTimestamp.Add(NewBindingGrace))
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
