package ledger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// ExpandClaims raises the storage request of each of the binding's claims
// (as claims shows them, by name) that asks for less than its decision's
// size, when the claim is the binding's own: a binding that took over a
// smaller one's claims (decision.GrowsInPlace) grows them in place, and a
// claim its StatefulSet makes later from the older template grows the same
// way. The resize itself is the StorageClass's provisioner's, through the
// claim's status; decision.ClaimsGrowing counts the resizes under way. It
// returns how many claims the API server refused to expand (each a
// Warning event; tried again at the next reconcile).
func (l *Ledger) ExpandClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) (refused int) {
	size := binding.Spec.Decision.Size
	if binding.Spec.Decision.ExistingClaim != "" || size.IsZero() {
		return 0
	}
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		claim := claims[name]
		// Only a Bound claim's request may grow (k8s pkg/apis/core/validation,
		// ValidatePersistentVolumeClaimUpdate); a Pending one grows once bound.
		if claim == nil || decision.ClaimOwnership(binding, claim) != "" || !claim.DeletionTimestamp.IsZero() || claim.Status.Phase != corev1.ClaimBound {
			continue
		}
		if request := claim.Spec.Resources.Requests[corev1.ResourceStorage]; request.Cmp(size) >= 0 {
			continue
		}
		patch := fmt.Appendf(nil, `{"spec":{"resources":{"requests":{"storage":%q}}}}`, size.String())
		if err := l.client.Patch(ctx, claim, client.RawPatch(types.MergePatchType, patch)); err != nil {
			// Reported, never a reason to stop the server's reconcile: the
			// data is there, it is the extra room that is refused (a
			// ResourceQuota, a class changed since).
			refused++
			l.events.Eventf(binding, nil, corev1.EventTypeWarning, embedopsv1.ClaimExpansionFailedReason, "Expand",
				"expanding claim %s to %s: %v", name, size.String(), err)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("expanding cache claim", "binding", binding.Name, "claim", name, "size", size.String())
		l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.ClaimExpandingReason, "Expand",
			"expanding claim %s to %s in place: no new volume, nothing downloaded", name, size.String())
	}
	return refused
}
