package controller

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/ledger"
)

// carryOut is the act step: it writes what the phases of its round
// planned (scope.plan): a deleted server's deletion (carryOutDeletion), or,
// in order, the finalizer, the binding (bind), the claims' labels and
// their expansion (ledger.ExpandClaims), the populate Job and the
// binding's record of it (writePopulate), a populate Job's result, the
// claims of new replicas (carryOutSeeds), the children (carryOutChildren), what the pods realized, and a binding out
// of room (markOutOfRoom). It runs after
// the last phase of its round, also when that phase stopped the reconcile
// or failed: what the round planned is written. The status is written
// after the last round, once, when the reconcile ends (finalizeStatus).
func (r *EmbeddingServerReconciler) carryOut(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	plan := scope.plan
	scope.plan = serverPlan{}
	if plan.deletion != nil {
		return ctrl.Result{}, r.carryOutDeletion(ctx, scope, plan.deletion)
	}
	if plan.finalizer {
		if err := scope.patcher.AddFinalizer(ctx, scope.server, embedopsv1.ServerFinalizer); err != nil {
			return ctrl.Result{}, err
		}
		scope.readLive = true
	}
	if err := r.bind(ctx, scope, plan.bind); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.untrackClaims(ctx, plan.untrack); err != nil {
		return ctrl.Result{}, err
	}
	if plan.expand {
		scope.expansionRefused = r.ledger.ExpandClaims(ctx, scope.binding, scope.observed.claims)
	}
	if err := r.writePopulate(ctx, scope, plan.populate); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.recordRealized(ctx, scope, plan.populated); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.carryOutSeeds(ctx, scope, plan.seeds); err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.carryOutChildren(ctx, scope, plan.children)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.recordRealized(ctx, scope, plan.realized); err != nil {
		return result, err
	}
	return result, r.markOutOfRoom(ctx, scope, plan.outOfRoom)
}

// carryOutChildren applies the planned children, drains the old
// StatefulSets, prunes, and leaves every binding but the one in use (all
// of them for mode None) whose storage no old StatefulSet and no pod of
// the server still mounts (storagesInUse), so a binding is never released
// while a StatefulSet still names its claims or a pod mounts them. From
// then on status.cacheBinding names the binding in use: the pods mount it.
func (r *EmbeddingServerReconciler) carryOutChildren(ctx context.Context, scope *serverScope, planned *childrenPlan) (ctrl.Result, error) {
	if planned == nil {
		return ctrl.Result{}, nil
	}
	var result ctrl.Result
	if planned.apply {
		var err error
		if result, err = r.applyChildren(ctx, scope, planned); err != nil || scope.halted {
			return result, err
		}
	} else {
		scope.server.Status.Inventory = inventoryOf(scope.children)
	}
	if err := r.pruneChildren(ctx, scope); err != nil {
		return ctrl.Result{}, err
	}
	scope.server.Status.CacheBinding = planned.keep
	return result, r.ledger.Leave(ctx, scope.server, planned.keep, planned.inUse...)
}

// bind has the ledger find or create the requested binding and reference
// it (ledger.Bind; provenance is resolved only when a binding is created,
// since its source is immutable, and a problem with it is reported, never
// a reason to wait). The answer is scope.bound, for reportBinding.
func (r *EmbeddingServerReconciler) bind(ctx context.Context, scope *serverScope, request *bindRequest) error {
	if request == nil {
		return nil
	}
	server := scope.server
	var options []ledger.BindOption
	if scope.readLive {
		options = append(options, ledger.ServerReadLive())
	}
	if request.statefulSetAbsent {
		options = append(options, ledger.StatefulSetAbsent())
	}
	answer := &bindAnswer{decision: request.decision}
	bound, err := r.ledger.Bind(ctx, server, request.decision, func(ctx context.Context) (embedopsv1.DecisionSource, error) {
		var err error
		answer.resolution, err = r.provenance.Resolve(ctx, server)
		return answer.resolution.Source, err
	}, options...)
	if err != nil {
		return err
	}
	answer.bound = bound
	scope.bound = answer
	return nil
}

// untrackClaims writes the claims' planned label patches.
func (r *EmbeddingServerReconciler) untrackClaims(ctx context.Context, patches []claimPatch) error {
	for _, p := range patches {
		if err := r.act.MergePatch(ctx, p.claim, p.patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing GitOps tracking labels from claim %s: %w", p.claim.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("removed GitOps tracking labels from a cache claim", "claim", p.claim.Name)
	}
	return nil
}

// writePopulate carries out a populate Job's planned write.
func (r *EmbeddingServerReconciler) writePopulate(ctx context.Context, scope *serverScope, write *populateWrite) error {
	if write == nil {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	if job := write.create; job != nil {
		if err := r.act.CreateJob(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating populate Job %s: %w", job.Name, err)
		}
		log.Info("created populate Job", "job", job.Name, "binding", scope.binding.Name)
		r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, embedopsv1.DownloadingReason, "Populate", "%s", write.created)
	}
	reportPopulate(scope.server, write.reason, write.message)
	if err := r.ledger.ReportPopulate(ctx, scope.binding, write.reason, write.message); err != nil {
		return err
	}
	if write.warn {
		r.events.Eventf(scope.server, nil, corev1.EventTypeWarning, write.reason, "Populate", "%s", write.message)
	}
	if job := write.retry; job != nil {
		if err := r.act.DeleteJob(ctx, job); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting failed populate Job %s: %w", job.Name, err)
		}
		log.Info("deleted failed populate Job to retry it", "job", job.Name)
	}
	return nil
}

// applyChildren server-side applies the children; ssa's dry-run drift
// detection writes nothing when nothing changed. A StatefulSet the API
// server refuses to change in place is replaced (replaceStatefulSet), and
// the reconcile waits for its pods to go. Once applied, the old
// StatefulSets are drained as planned, and a changed StatefulSet is
// remembered for readiness (recordRollout).
func (r *EmbeddingServerReconciler) applyChildren(ctx context.Context, scope *serverScope, planned *childrenPlan) (ctrl.Result, error) {
	changes, replaced, err := r.apply(ctx, scope)
	if err != nil {
		r.verified.forget(scope.server.UID)
		return ctrl.Result{}, err
	}
	if replaced != nil {
		r.verified.forget(scope.server.UID)
		return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, r.replaceStatefulSet(ctx, scope)
	}
	// Recorded once applied: a failed apply keeps the inventory it would
	// have pruned from.
	scope.server.Status.Inventory = inventoryOf(scope.children)
	if err := r.rememberApply(scope, changes); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.drainOldStatefulSets(ctx, scope, planned.drains); err != nil {
		return ctrl.Result{}, err
	}
	for _, entry := range changes.Entries {
		if entry.Action == ssa.UnchangedAction {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("applied child", "child", entry.Subject, "action", entry.Action.String())
		if entry.ObjMetadata.GroupKind == statefulSetKind {
			if err := r.recordRollout(ctx, scope, entry.ObjMetadata.Name); err != nil {
				return ctrl.Result{}, err
			}
			if entry.Action == ssa.CreatedAction && scope.rollout != nil {
				r.reportNewStorage(ctx, scope)
			}
		}
	}
	return ctrl.Result{}, nil
}

// pruneChildren deletes children of the previous inventory that the
// inventory just recorded does not list. Claims are never pruned.
func (r *EmbeddingServerReconciler) pruneChildren(ctx context.Context, scope *serverScope) error {
	stale := staleEntries(scope.inventoryBefore, scope.server.Status.Inventory)
	if len(stale) == 0 {
		return nil
	}
	if err := r.deleteEntries(ctx, scope.server, stale); err != nil {
		return fmt.Errorf("pruning children: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("pruned children", "count", len(stale))
	return nil
}
