package ledger

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// DefaultFirstReferenceWait is how long a new server leaves the first
// reference of the binding it created unwritten while the binding's claims
// bind: a provisioner usually binds a new claim within seconds, and the
// binding's first status, written then, is its Ready=True one.
const DefaultFirstReferenceWait = 20 * time.Second

// firstReferenceWaitOf turns Options.FirstReferenceWait into the wait the
// ledger uses: the default for 0, none for a negative value, and never more
// than half of CreatorGrace, so the creator writes its reference well before
// the binding controller takes the binding for one whose creator died.
func firstReferenceWaitOf(wait time.Duration) time.Duration {
	switch {
	case wait == 0:
		return DefaultFirstReferenceWait
	case wait < 0:
		return 0
	}
	return min(wait, CreatorGrace/2)
}

// firstReferenceWait is how much longer the server may leave unwritten the
// first reference of a binding it created; zero means write it now.
//
// A new binding's first status is written whole by its creator's reference
// (firstStatus), and the binding controller leaves a binding without a
// phase to its creator (awaitsCreator). Written at once, that status says
// the claims are not Bound yet (the StatefulSet has not even made them),
// and the binding controller writes it again when they bind: two writes per
// new server. Written once the claims are Bound, it is the binding's Ready
// status, and nothing writes it again. So the server that created a
// PerReplica binding for its first storage waits, up to the wait, for the
// claims its StatefulSet makes to be Bound (read from the cache; its pods'
// scheduling wakes it). Meanwhile the binding is held by its creator as
// any binding without a phase is, and a Shared binding is never left
// waiting: its claim is made by the binding controller, after the first
// status. A successor, whose storage is taken over already bound, and a
// server moving to new storage reference at once as before.
func (l *Ledger) firstReferenceWait(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) (time.Duration, error) {
	if l.firstRefWait <= 0 || !decision.AwaitsFirstReference(binding, server.UID) ||
		(server.Status.CacheBinding != "" && server.Status.CacheBinding != binding.Name) {
		return 0, nil
	}
	left := binding.CreationTimestamp.Add(l.firstRefWait).Sub(l.now())
	if left <= 0 {
		return 0, nil
	}
	claims, err := l.existingClaims(ctx, binding)
	if err != nil {
		return 0, err
	}
	if decision.BindingReadiness(binding, byName(claims)).Status == metav1.ConditionTrue {
		return 0, nil
	}
	return left, nil
}
