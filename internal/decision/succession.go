package decision

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// StorageName is the name a binding's workload carries for its storage: the
// cache-binding label of pods and claims and the Shared claim's name. A
// binding that superseded another records the name it took over; any other
// is known by its own name.
func StorageName(binding *embedopsv1.ModelCacheBinding) string {
	if name := binding.Spec.Resources.StorageName; name != "" {
		return name
	}
	return binding.Name
}

// ClaimTemplateNameFor is a PerReplica binding's claim template: the one it
// took over, or the one its decision and name give (ClaimTemplateNameOf).
func ClaimTemplateNameFor(binding *embedopsv1.ModelCacheBinding) string {
	if name := binding.Spec.Resources.ClaimTemplateName; name != "" {
		return name
	}
	return ClaimTemplateNameOf(Recorded(binding), binding.Name)
}

// ClaimNamesFor are the claims a binding holds for a server of replicas
// replicas named server: its Shared claim, or the PerReplica claims of the
// current replicas under its claim template and StatefulSet
// (StatefulSetNameFor); none for an existing claim.
func ClaimNamesFor(binding *embedopsv1.ModelCacheBinding, server string, replicas int32) []string {
	if binding.Spec.Decision.ExistingClaim != "" {
		return nil // the user's claim is recorded in the decision, never held.
	}
	if binding.Spec.Decision.Mode == embedopsv1.CacheModeShared {
		return []string{StorageName(binding)}
	}
	return PerReplicaClaimNames(ClaimTemplateNameFor(binding), StatefulSetNameFor(binding, server), replicas)
}

// Recorded is the decision a binding records.
func Recorded(binding *embedopsv1.ModelCacheBinding) *Decision {
	return &Decision{Identity: binding.Spec.Identity, Decision: binding.Spec.Decision}
}

// SameStorage reports whether d differs from the binding's decision at most
// in retainFor (SameStoragePart), so the same claims serve it.
func SameStorage(binding *embedopsv1.ModelCacheBinding, d *Decision) bool {
	return SameStoragePart(Recorded(binding), d)
}

// SameStoragePart reports whether two decisions have the same storage part,
// the decision without retainFor: the same identity, mode, class, size,
// access modes, reclaim policy and existing claim.
func SameStoragePart(a, b *Decision) bool {
	return a.Identity.Key == b.Identity.Key &&
		a.Decision.Mode == b.Decision.Mode &&
		a.Decision.StorageClassName == b.Decision.StorageClassName &&
		a.Decision.Size.Cmp(b.Decision.Size) == 0 &&
		equality.Semantic.DeepEqual(accessModeSet(a.Decision.AccessModes), accessModeSet(b.Decision.AccessModes)) &&
		a.Decision.ReclaimPolicy == b.Decision.ReclaimPolicy &&
		a.Decision.ExistingClaim == b.Decision.ExistingClaim
}

// GrowsInPlace reports whether d differs from the binding's decision in a
// larger size (and at most retainFor besides), so the binding's claims can
// serve it once expanded, where their StorageClass allows expansion. An
// existing claim is the user's: never expanded.
func GrowsInPlace(binding *embedopsv1.ModelCacheBinding, d *Decision) bool {
	recorded := Recorded(binding)
	if d.Decision.ExistingClaim != "" || d.Decision.Size.Cmp(recorded.Decision.Size) <= 0 {
		return false
	}
	grown := *d
	grown.Decision.Size = recorded.Decision.Size
	return SameStoragePart(recorded, &grown)
}

// RevisesInPlace reports whether d differs from a PerReplica binding's
// decision in the model's revision (and at most retainFor and a larger
// size besides), so the binding's claims can serve it: the hub cache is
// content addressed, so the populator fetches only the files of the new
// revision that no claim holds yet (blobs/<blob> are shared between
// revisions, populate ensureBlob). The pods then roll in place, one at a
// time (InPlaceRollAllowed); a larger size also needs expansion.
func RevisesInPlace(binding *embedopsv1.ModelCacheBinding, d *Decision) bool {
	recorded := Recorded(binding)
	if recorded.Decision.Mode != embedopsv1.CacheModePerReplica || d.Decision.ExistingClaim != "" ||
		recorded.Identity.Model != d.Identity.Model || recorded.Identity.SharingDomain != d.Identity.SharingDomain ||
		recorded.Identity.Revision == d.Identity.Revision {
		return false
	}
	revised := *d
	revised.Identity = recorded.Identity
	return SameStoragePart(recorded, &revised) || GrowsInPlace(binding, &revised)
}

// InPlaceRollAllowed reports whether the server's pods may be replaced one
// at a time on their own claims: the StatefulSet's rolling update takes one
// pod down before its successor starts (k8s pkg/controller/statefulset,
// RollingUpdate with maxUnavailable 1), so the server needs two replicas
// or more and a disruption budget that lets one be unavailable. A single
// replica, or a budget of none, moves to new storage surge first instead.
func InPlaceRollAllowed(replicas int32, maxUnavailable int32) bool {
	return replicas >= 2 && maxUnavailable >= 1
}

// Supersedable reports whether the server with uid may hand the binding's
// storage to a successor: Active, not being deleted, not out of room (its
// claims are what the server leaves) and referenced by that server alone.
func Supersedable(binding *embedopsv1.ModelCacheBinding, uid types.UID) bool {
	refs := binding.Status.RequestReferences
	return IsActive(binding) && binding.DeletionTimestamp.IsZero() && !OutOfRoom(binding) &&
		len(refs) == 1 && refs[0].UID == uid
}

// Succeeds reports whether successor records that it took over the storage
// of predecessor.
func Succeeds(successor, predecessor *embedopsv1.ModelCacheBinding) bool {
	return successor.Spec.Supersedes == predecessor.Name && StorageName(successor) == StorageName(predecessor)
}

// HandingOver reports whether a binding is handing its storage to a
// successor: it gains no reference any more.
func HandingOver(binding *embedopsv1.ModelCacheBinding) bool {
	return binding.Status.SupersededBy != ""
}

// InheritedClaimNames are the claims a successor of predecessor lists when
// it is created: every claim predecessor lists, then own, in order and
// without repeats.
func InheritedClaimNames(predecessor []string, own []string) []string {
	names := slices.Clone(predecessor)
	return append(names, MissingNames(names, own)...)
}

// Supersede records that a binding handed its storage to its successor:
// Released at now without deleting anything, with no references and no
// idle window.
func Supersede(binding *embedopsv1.ModelCacheBinding, now time.Time) {
	binding.Status.Phase = embedopsv1.BindingReleased
	binding.Status.ReleasedAt = &metav1.Time{Time: now}
	binding.Status.RequestReferences = nil
	binding.Status.IdleSince, binding.Status.RetireAfter = nil, nil
}

// Recording is a binding that records d and nothing else: the shape the
// succession predicates take, for readers that have decisions, not
// bindings (the plan, the audit).
func Recording(d *Decision) *embedopsv1.ModelCacheBinding {
	return &embedopsv1.ModelCacheBinding{Spec: embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision}}
}

// Succession is the kind of change by which a successor binding may take
// over its predecessor's claims.
type Succession string

// Kinds of succession.
const (
	// NoSuccession: the new decision needs storage of its own.
	NoSuccession Succession = ""
	// RetainForSuccession: retainFor alone changed (SameStoragePart).
	RetainForSuccession Succession = "RetainFor"
	// GrowthSuccession: a larger size, the claims expanded in place
	// (GrowsInPlace).
	GrowthSuccession Succession = "Growth"
	// RevisionSuccession: a new model revision, the pods rolled in place
	// (RevisesInPlace), with a larger size expanded in place too.
	RevisionSuccession Succession = "Revision"
)

// SuccessionOf is how d may take over the storage of a binding recording
// from, by the decisions alone. A growth or a revision also needs cluster
// conditions the caller checks: a StorageClass that expands (for any larger
// size), RoomForAnotherRevision and InPlaceRollAllowed.
func SuccessionOf(from, d *Decision) Succession {
	recorded := Recording(from)
	switch {
	case SameStoragePart(from, d):
		return RetainForSuccession
	case GrowsInPlace(recorded, d):
		return GrowthSuccession
	case RevisesInPlace(recorded, d):
		return RevisionSuccession
	}
	return NoSuccession
}
