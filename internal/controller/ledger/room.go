package ledger

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// MarkOutOfRoom records that the binding's claims have no room for its
// revision: OutOfRoom True with reason and message, and a Warning event of
// the binding. From then on no server uses it (decision.Usable) and none
// hands its storage on (decision.Supersedable), so its server's next Bind
// creates storage of its own, which the pods move to as for any storage
// change. Written once, with the resourceVersion the binding was read at;
// wrote reports whether this call wrote it.
func (l *Ledger) MarkOutOfRoom(ctx context.Context, binding *embedopsv1.ModelCacheBinding, reason, message string) (wrote bool, err error) {
	if decision.OutOfRoom(binding) {
		return false, nil
	}
	conditions.MarkTrue(binding, embedopsv1.OutOfRoomCondition, reason, "%s", message)
	if err := l.updateStatus(ctx, binding); err != nil {
		return false, fmt.Errorf("marking binding %s out of room: %w", binding.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("marked a binding out of room", "binding", binding.Name, "reason", reason)
	l.events.Eventf(binding, nil, corev1.EventTypeWarning, reason, "Populate", "%s", message)
	return true, nil
}
