package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// DefaultFirstReferenceWait bounds how long a new server leaves the first
// reference of the binding it created unwritten while the binding's claims
// bind. A provisioner binds a claim within seconds when idle, but a fleet
// created at once queues behind its workers (the bench's 1,000 servers wait
// up to two minutes); past the wait the reference is written with the
// claims Pending, so a claim that never binds still shows on the binding.
const DefaultFirstReferenceWait = 5 * time.Minute

// firstReferenceWaitOf turns Options.FirstReferenceWait into the wait the
// ledger uses: the default for 0, none for a negative value.
func firstReferenceWaitOf(wait time.Duration) time.Duration {
	switch {
	case wait == 0:
		return DefaultFirstReferenceWait
	case wait < 0:
		return 0
	}
	return wait
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
// scheduling usually wakes it, and it looks again every progress interval
// meanwhile; decision.FirstReferenceWindow says when it may).
// Meanwhile the binding controller leaves the binding
// to its creator for as long as the creator exists, and a creator that
// leaves it, deleted or on another decision, writes its first status
// without a reference (abandonAwaiting); a decision that takes its storage
// over references it first (predecessor). A Shared binding is never left
// waiting: its claim is made by the binding controller, after the first
// status. A successor, whose storage is taken over already bound, and a
// server moving to new storage reference at once as before.
func (l *Ledger) firstReferenceWait(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) (time.Duration, error) {
	left := decision.FirstReferenceWindow(binding, server.UID, server.Status.CacheBinding, l.firstRefWait, l.now())
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

// abandonAwaiting writes the first status of each binding but keep (and
// those whose storage is inUse, as Leave) that the server created and never
// referenced (firstReferenceWait), without a reference: Active and idle
// from now, so it retires after its retainFor as any binding its last
// server left, without waiting for the binding controller to find its
// creator gone.
func (l *Ledger) abandonAwaiting(ctx context.Context, server *embedopsv1.EmbeddingServer, keep string, inUse []string) error {
	var created embedopsv1.ModelCacheBindingList
	if err := l.client.List(ctx, &created, client.InNamespace(server.Namespace), client.MatchingLabels{embedopsv1.ServerUIDLabel: string(server.UID)}); err != nil {
		return fmt.Errorf("listing the bindings the server created: %w", err)
	}
	for i := range created.Items {
		if created.Items[i].Name == keep || !decision.AwaitsFirstReference(&created.Items[i], server.UID) ||
			slices.Contains(inUse, decision.StorageName(&created.Items[i])) {
			continue
		}
		binding, err := l.latest(ctx, client.ObjectKeyFromObject(&created.Items[i]))
		if err != nil {
			return err
		}
		if binding == nil || !decision.AwaitsFirstReference(binding, server.UID) {
			continue
		}
		binding.Status.Phase = embedopsv1.BindingActive
		decision.MarkIdle(binding, l.now(), true)
		if err := l.firstStatus(ctx, binding); err != nil {
			return err
		}
		if err := l.updateStatus(ctx, binding); err != nil {
			return fmt.Errorf("leaving binding %s before its first reference: %w", binding.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("left binding before its first reference", "binding", binding.Name)
	}
	return nil
}
