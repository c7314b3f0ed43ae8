package controller

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/internal/provenance"
)

// reconcileBinding has the ledger find or create the binding of the server's
// cache decision and reference it; leaveStaleBindings leaves the others once
// the children no longer use them. Mode None has no binding. It sets the
// cache the children are built with.
func (r *EmbeddingServerReconciler) reconcileBinding(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
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
	bound, err := r.ledger.Bind(ctx, server, d, func(ctx context.Context) (embedopsv1.DecisionSource, error) {
		return r.provenance.Resolve(ctx, server)
	})
	switch {
	case errors.Is(err, provenance.ErrSourcePending):
		message := "waiting for the GitOps tool to finish applying the server before recording its cache decision"
		conditions.MarkFalse(server, embedopsv1.CacheReadyCondition, embedopsv1.PendingReason, "%s", message)
		conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.ProgressingReason, "%s", message)
		scope.halted = true
		return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
	case errors.Is(err, provenance.ErrInvalidRevision):
		return ctrl.Result{}, r.refuseSpec(scope, err)
	case err != nil:
		return ctrl.Result{}, err
	case bound.ServerGone:
		ctrl.LoggerFrom(ctx).Info("not referencing a binding: the server is gone or being deleted")
		scope.halted = true
		return ctrl.Result{}, nil
	}
	if bound.Created {
		r.eventDecision(server, bound.Binding.Name, bound.Binding.Spec.Source)
	}
	scope.cache = cacheOf(d, bound.Binding.Name, r.populatorImage)
	scope.binding = bound.Binding
	if realized := bound.Binding.Status.Realized; realized != nil {
		scope.resolvedCommit = realized.ResolvedCommit
	}
	return ctrl.Result{}, r.reportCacheReady(ctx, server, bound.Binding)
}

// leaveStaleBindings leaves every binding but the one in use (all of them
// for mode None) once the children are applied and pruned, so a binding is
// never released while the StatefulSet still names its claims. From then on
// status.cacheBinding names the binding in use: the pods mount it.
func (r *EmbeddingServerReconciler) leaveStaleBindings(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	keep := ""
	if scope.binding != nil {
		keep = scope.binding.Name
	}
	scope.server.Status.CacheBinding = keep
	return ctrl.Result{}, r.ledger.Leave(ctx, scope.server, keep)
}

// reportCacheReady sets CacheReady from the binding's phase and its claims,
// read from the cache, which holds the labelled claims only.
func (r *EmbeddingServerReconciler) reportCacheReady(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) error {
	var claims corev1.PersistentVolumeClaimList
	if err := r.client.List(ctx, &claims, client.InNamespace(server.Namespace), client.MatchingLabels{embedopsv1.NamespaceLabel: server.Namespace}); err != nil {
		return err
	}
	byName := make(map[string]*corev1.PersistentVolumeClaim, len(claims.Items))
	for i := range claims.Items {
		byName[claims.Items[i].Name] = &claims.Items[i]
	}
	ready := decision.CacheReadiness(binding, byName)
	if ready.Status == metav1.ConditionTrue {
		conditions.MarkTrue(server, embedopsv1.CacheReadyCondition, ready.Reason, "%s", ready.Message)
	} else {
		conditions.MarkFalse(server, embedopsv1.CacheReadyCondition, ready.Reason, "%s", ready.Message)
	}
	return nil
}

// eventDecision tells, on the server, which revision a new cache decision
// was recorded at; an unknown source is a warning, since the decision
// cannot be audited from git.
func (r *EmbeddingServerReconciler) eventDecision(server *embedopsv1.EmbeddingServer, binding string, source embedopsv1.DecisionSource) {
	if source.Method == embedopsv1.SourceUnknown {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, embedopsv1.SourceUnknownReason, "RecordDecision",
			"recorded cache decision %s with no known source: annotate the server with %s or apply it with Flux or Argo CD to make it auditable",
			binding, embedopsv1.SourceRevisionAnnotation)
		return
	}
	r.events.Eventf(server, nil, corev1.EventTypeNormal, embedopsv1.DecisionRecordedReason, "RecordDecision",
		"recorded cache decision %s at %s (%s)", binding, source.Revision, source.Method)
}

// jitter adds up to a tenth to a requeue, so servers changed together do
// not come back together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}
