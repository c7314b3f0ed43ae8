package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/internal/provenance"
)

// bindRequest is what the act step asks the ledger to bind: the server's
// cache decision, and whether this reconcile's ownership check read,
// uncached, that no StatefulSet has the server's name.
type bindRequest struct {
	decision          *decision.Decision
	statefulSetAbsent bool
}

// bindAnswer is the ledger's answer to a bindRequest: what Bind did, and
// the provenance it resolved when it created the binding.
type bindAnswer struct {
	bound      ledger.Bound
	decision   *decision.Decision
	resolution provenance.Resolution
}

// reconcileBinding plans the binding of the server's cache decision: the
// act step has the ledger find or create it and reference it (bind), and
// reportBinding goes on from the answer; the act step leaves the other
// bindings once the children no longer use them (childrenPlan). Mode None
// has no binding.
func (r *EmbeddingServerReconciler) reconcileBinding(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	d, err := decision.For(server)
	if err != nil {
		if errors.Is(err, decision.ErrInvalidSpec) {
			return ctrl.Result{}, r.refuseSpec(scope, err)
		}
		return ctrl.Result{}, err
	}
	if d == nil {
		conditions.Delete(server, embedopsv1.CacheReadyCondition)
		return ctrl.Result{}, nil
	}
	scope.plan.bind = &bindRequest{decision: d, statefulSetAbsent: scope.absent[statefulSetRef(server).ID]}
	return ctrl.Result{}, nil
}

// reportBinding goes on from the ledger's answer (scope.bound): it sets
// SourceResolved and the cache the children are built with, and plans the
// claims' label patches (untrackPatches) and their expansion. A server the
// ledger found gone or being deleted stops here.
func (r *EmbeddingServerReconciler) reportBinding(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	answer, server := scope.bound, scope.server
	if answer == nil {
		return ctrl.Result{}, nil
	}
	bound := answer.bound
	switch {
	case bound.ServerGone:
		ctrl.LoggerFrom(ctx).Info("not referencing a binding: the server is gone or being deleted")
		scope.halted = true
		return ctrl.Result{}, nil
	case bound.Created:
		r.reportSource(server, bound.Binding.Name, answer.resolution)
	case !conditions.Has(server, embedopsv1.SourceResolvedCondition):
		r.reportRecordedSource(server, bound.Binding)
	case conditions.GetReason(server, embedopsv1.SourceResolvedCondition) == embedopsv1.SourcePendingReason:
		r.recheckPendingSource(ctx, scope, bound.Binding)
	}
	scope.cache = cacheOf(answer.decision, bound.Binding, r.populatorImage)
	scope.binding = bound.Binding
	if realized := bound.Binding.Status.Realized; realized != nil {
		scope.resolvedCommit = realized.ResolvedCommit
	}
	result := pendingSourceRequeue(server, r.progressInterval)
	if bound.ReferenceWait > 0 {
		// The pods' scheduling usually wakes the server once the claims
		// bind, but their events may all come before the cache shows a
		// claim Bound (another watch), and a Ready server asks for no
		// other requeue: it looks again every progress interval, and at
		// the latest when the wait ends.
		result = sooner(result, jitter(min(bound.ReferenceWait, r.progressInterval)))
	}
	scope.plan.untrack = untrackPatches(bound.Binding, scope.observed.claims)
	scope.plan.expand = true
	return result, nil
}

// reportCache sets CacheReady from the binding in use and its claims, as
// the act step's label patches and expansion left them; mode None has no
// binding.
func (r *EmbeddingServerReconciler) reportCache(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	if scope.binding != nil {
		reportCacheReady(scope.server, scope.binding, scope.observed.claims, scope.expansionRefused)
	}
	return ctrl.Result{}, nil
}

// reportCacheReady sets CacheReady from the binding's phase and its claims,
// read from the cache, which holds the labelled claims only, as the
// ledger's expansion left them (refused: claims it could not grow).
func reportCacheReady(server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, byName map[string]*corev1.PersistentVolumeClaim, refused int) {
	ready := decision.CacheReadiness(binding, byName)
	if refused > 0 {
		ready.Message += fmt.Sprintf(" (%d refused: see the binding's %s events)", refused, embedopsv1.ClaimExpansionFailedReason)
	}
	if ready.Status == metav1.ConditionTrue {
		conditions.MarkTrue(server, embedopsv1.CacheReadyCondition, ready.Reason, "%s", ready.Message)
	} else {
		conditions.MarkFalse(server, embedopsv1.CacheReadyCondition, ready.Reason, "%s", ready.Message)
	}
}

// reportSource sets SourceResolved from the resolution the new binding
// recorded, with the revision it was recorded at in its message, and a
// Warning event per change of reason when the source is not known. A known
// source has no event of the server's own: the binding's Created event
// names it, and the condition keeps it. Provenance never stalls a server.
func (r *EmbeddingServerReconciler) reportSource(server *embedopsv1.EmbeddingServer, binding string, res provenance.Resolution) {
	source := res.Source
	if res.Disagreement != "" {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, embedopsv1.DeclaredRevisionIgnoredReason, "RecordDecision",
			"cache decision %s: %s", binding, res.Disagreement)
	}
	if res.Reason == "" {
		conditions.MarkTrue(server, embedopsv1.SourceResolvedCondition, embedopsv1.SourceResolvedReason,
			"cache decision %s recorded at %s (%s)", binding, source.Revision, source.Method)
		return
	}
	changed := conditions.GetReason(server, embedopsv1.SourceResolvedCondition) != res.Reason
	conditions.MarkFalse(server, embedopsv1.SourceResolvedCondition, res.Reason,
		"cache decision %s recorded with method %s: %s", binding, source.Method, res.Message)
	if changed {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, res.Reason, "RecordDecision",
			"recorded cache decision %s with method %s: %s", binding, source.Method, res.Message)
	}
}

// reportRecordedSource sets SourceResolved, without an event, for a server
// that uses a binding another server created: from the source the binding
// records.
func (r *EmbeddingServerReconciler) reportRecordedSource(server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) {
	source := binding.Spec.Source
	if source.Method == embedopsv1.SourceUnknown {
		conditions.MarkFalse(server, embedopsv1.SourceResolvedCondition, embedopsv1.SourceUnknownReason,
			"binding %s records its cache decision with no known source", binding.Name)
		return
	}
	conditions.MarkTrue(server, embedopsv1.SourceResolvedCondition, embedopsv1.SourceResolvedReason,
		"cache decision %s recorded at %s (%s)", binding.Name, source.Revision, source.Method)
}

// jitter adds up to a tenth to a requeue, so servers changed together do
// not come back together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

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
