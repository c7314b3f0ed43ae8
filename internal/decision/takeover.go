package decision

import (
	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// TakeoverFacts are what a takeover depends on beyond the two decisions.
type TakeoverFacts struct {
	// Replicas are the server's replicas after the change.
	Replicas int32
	// AllowedUnavailable is how many of them the server's disruption
	// budget lets be unavailable; nil when not known.
	AllowedUnavailable *int32
	// ClassExpands reports whether the storage's StorageClass allows
	// volume expansion, and whether that is known; nil when nobody can
	// tell. It is asked only for a larger size, so a caller that reads it
	// reads only then.
	ClassExpands func() (expands, known bool)
}

// Takeover is how a binding of d takes over the storage of from, a binding
// whose status.realized records what its claims hold and have free: the
// kind of succession by the decisions alone (SuccessionOf), then for a
// revision InPlaceRollAllowed and RoomForAnotherRevision, and for a larger
// size a StorageClass that expands. A rule known to fail is NoSuccession.
// A rule whose fact is not known is not guessed: it is named in unknown,
// and the caller decides (the ledger takes storage of its own, a plan
// states the condition). The ledger and the plan both apply this, so
// `embedops plan` predicts what the controller does.
func Takeover(from *embedopsv1.ModelCacheBinding, d *Decision, facts TakeoverFacts) (kind Succession, unknown []string) {
	kind = SuccessionOf(Recorded(from), d)
	if kind == NoSuccession || kind == RetainForSuccession {
		return kind, nil
	}
	if kind == RevisionSuccession {
		switch {
		case !InPlaceRollAllowed(facts.Replicas, facts.Replicas):
			return NoSuccession, nil // too few replicas, whatever the budget
		case facts.AllowedUnavailable == nil:
			unknown = append(unknown, "its disruption budget lets a replica be unavailable")
		case !InPlaceRollAllowed(facts.Replicas, *facts.AllowedUnavailable):
			return NoSuccession, nil
		}
		switch {
		case from.Status.Realized == nil || from.Status.Realized.Bytes == nil:
			unknown = append(unknown, "the claims have room for another revision (the model's size is not known)")
		case !RoomForAnotherRevision(from, d):
			return NoSuccession, nil
		}
	}
	if d.Decision.Size.Cmp(from.Spec.Decision.Size) > 0 {
		expands, known := false, false
		if facts.ClassExpands != nil {
			expands, known = facts.ClassExpands()
		}
		switch {
		case !known:
			unknown = append(unknown, classOf(d)+" allows volume expansion")
		case !expands:
			return NoSuccession, nil
		}
	}
	return kind, unknown
}
