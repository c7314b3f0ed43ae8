package decision

import (
	"fmt"
	"strings"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Facts are what a plan knows beyond the manifests; each is nil when
// unknown, and a succession that depends on it is then conditional.
type Facts struct {
	// Bindings give model sizes (status.realized, RealizedBytes) and the
	// room their claims have (realizedRoom).
	Bindings []embedopsv1.ModelCacheBinding
	// ClassExpands reports whether a StorageClass ("" for the default)
	// allows volume expansion, and whether that is known.
	ClassExpands func(class string) (expands, known bool)
	// AllowedUnavailable is how many of a server's replicas its disruption
	// budget lets be unavailable (builder.AllowedUnavailable, which this
	// package cannot import).
	AllowedUnavailable func(*embedopsv1.EmbeddingServer) int32
}

// succeeding is a binding after a change that takes over the claims of
// predecessor, a binding before it.
type succeeding struct {
	predecessor string
	kind        Succession
	// condition is what the takeover depends on that the plan does not
	// know, "" when nothing.
	condition string
}

// takeover is how a server's new decision takes over the claims of its old
// one, by the rules the ledger applies (Takeover), with the room of the
// newest binding of the old identity (realizedRoom). A rule whose facts the
// plan lacks is named in the condition.
func takeover(old, updated *decided, facts Facts) (Succession, string) {
	recorded := Recording(old.decision)
	recorded.Status.Realized = realizedRoom(facts.Bindings, old.decision.Identity)
	known := TakeoverFacts{Replicas: updated.server.GetReplicas()}
	if facts.AllowedUnavailable != nil {
		known.AllowedUnavailable = new(facts.AllowedUnavailable(updated.server))
	}
	if facts.ClassExpands != nil {
		known.ClassExpands = func() (bool, bool) { return facts.ClassExpands(updated.decision.Decision.StorageClassName) }
	}
	kind, unknown := Takeover(recorded, updated.decision, known)
	if kind == NoSuccession || len(unknown) == 0 {
		return kind, ""
	}
	return kind, "if " + strings.Join(unknown, " and ") + "; otherwise new storage, and the old cache retires"
}

// classOf names a decision's StorageClass.
func classOf(d *Decision) string {
	if d.Decision.StorageClassName == "" {
		return "the default StorageClass"
	}
	return fmt.Sprintf("StorageClass %q", d.Decision.StorageClassName)
}

// successorAction is the plan's action for a kind of succession.
func successorAction(kind Succession) Action {
	switch kind {
	case GrowthSuccession:
		return ActionKeepExpanded
	case RevisionSuccession:
		return ActionKeepRevised
	default:
		return ActionKeepLifetimeChanged
	}
}

// realizedRoom is what RoomForAnotherRevision reads of the binding whose
// claims the revision would roll on: the model's size (RealizedBytes) and
// the files, free and reclaimable bytes the newest binding of exactly
// identity (its sharing domain too: a PerReplica binding's claims are its
// server's) recorded; without them the rule is the one the ledger applies
// to an earlier release's binding, both revisions within the size's
// usable bytes (UsableBytes).
func realizedRoom(bindings []embedopsv1.ModelCacheBinding, identity embedopsv1.CacheIdentity) *embedopsv1.RealizedCache {
	room := &embedopsv1.RealizedCache{Bytes: RealizedBytes(bindings, identity)}
	var found *embedopsv1.ModelCacheBinding
	for i := range bindings {
		b := &bindings[i]
		if b.Spec.Identity != identity || b.Status.Realized == nil || b.Status.Realized.FreeBytes == nil {
			continue
		}
		if found == nil || newer(b, found) {
			found = b
		}
	}
	if found != nil {
		room.Files = found.Status.Realized.Files
		room.FreeBytes, room.ReclaimableBytes = found.Status.Realized.FreeBytes, found.Status.Realized.ReclaimableBytes
	}
	return room
}
