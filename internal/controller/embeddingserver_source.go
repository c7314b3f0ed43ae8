package controller

import (
	"context"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// recheckPendingSource asks again where the server came from while its
// SourceResolved says SourcePending: the GitOps tool was still applying it
// when the binding was recorded. Once the tool lists the server (Flux's
// inventory) the condition turns True from the binding's record, which
// stays as it is: a binding's source is immutable, and the commit being
// applied was recorded then. A failing lookup leaves the condition as it
// is; provenance never holds a server.
func (r *EmbeddingServerReconciler) recheckPendingSource(ctx context.Context, scope *serverScope, binding *embedopsv1.ModelCacheBinding) {
	res, err := r.provenance.Resolve(ctx, scope.server)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("rechecking the pending source", "error", err.Error())
		return
	}
	if res.Reason == embedopsv1.SourcePendingReason {
		return
	}
	r.reportRecordedSource(scope.server, binding)
}

// pendingSourceRequeue comes back after interval while the source is
// pending: nothing the controller watches changes when the tool catches up.
func pendingSourceRequeue(server *embedopsv1.EmbeddingServer, interval time.Duration) ctrl.Result {
	if conditions.GetReason(server, embedopsv1.SourceResolvedCondition) != embedopsv1.SourcePendingReason {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: jitter(interval)}
}
