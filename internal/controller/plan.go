package controller

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// serverPlan is what the phases of a round decided to write: the
// server's finalizer, its binding, and its own objects. They decide from
// the observed snapshot and the answers of the rounds before; carryOut,
// the act step, writes it in one place, in order.
type serverPlan struct {
	// finalizer: the server lacks embedopsv1.ServerFinalizer, which is
	// written first, before any binding is referenced.
	finalizer bool
	// bind is the binding the ledger finds or creates and references;
	// nil for cache mode None.
	bind *bindRequest
	// untrack are the binding's claims that lose their GitOps tracking
	// labels (untrackPatch).
	untrack []claimPatch
	// expand: the ledger grows the claims of the binding in use that ask
	// for less than its decision (ledger.ExpandClaims).
	expand bool
	// populate is the populate Job's write and the binding's report of
	// it; nil when the server has no Job to run.
	populate *populateWrite
	// populated is what a succeeded populate Job realized, for the
	// binding to record before the children are built on its commit.
	populated *embedopsv1.RealizedCache
	// children is what the act step does with the built children; nil
	// when a phase stopped before them: then nothing is applied, pruned
	// or left.
	children *childrenPlan
	// realized is what the pods' populate init containers realized, for
	// the binding to record once (ledger.RecordRealized); nil for nothing.
	realized *embedopsv1.RealizedCache
	// outOfRoom marks the binding in use out of room (planOutOfRoom); nil
	// for nothing.
	outOfRoom *outOfRoomWrite
	// seeds are the claims of new replicas made from a populated one
	// (planSeeds); nil for nothing.
	seeds *seedWrite
	// deletion is what a deleted server's reconcile writes; then nothing
	// else is planned.
	deletion *deletionPlan
}

// claimPatch is a JSON merge patch of one claim.
type claimPatch struct {
	claim *corev1.PersistentVolumeClaim
	patch []byte
}

// populateWrite is a populate Job's write, in the act step's order: the
// Job created, the server's ModelReady and Ready told (reportPopulate),
// the binding told, a Warning event, the failed Job deleted.
type populateWrite struct {
	// create is a Job to create, and created the event that says so.
	create  *batchv1.Job
	created string
	// reason and message are reported on the binding (ledger.ReportPopulate).
	reason, message string
	// warn emits message as a Warning event of the server, once the
	// binding has it.
	warn bool
	// retry is a failed Job to delete, so that the next reconcile runs it
	// again.
	retry *batchv1.Job
}

// childrenPlan is what the act step does with the built children
// (scope.children).
type childrenPlan struct {
	// apply: the children are applied. False when the cache shows them as
	// the last unchanged apply left them and the spec builds the same
	// (verifiedChildren): then only the inventory is recorded.
	apply bool
	// drains are what the storage change's step does to the old
	// StatefulSets (decision.DrainOld), once the children are applied.
	drains []decision.Drain
	// keep is the binding the server keeps, "" for none; the server leaves
	// every other binding whose storage nothing of it mounts (inUse).
	keep  string
	inUse []string
}

// planChildren decides what the act step does with the built children:
// nothing while pods of a StatefulSet it replaced remain
// (waitForReplacedPods); else the storage change's step and drains, the
// claims of new replicas made from a populated one (planSeeds), whether
// the children need an apply at all, and which bindings the server leaves
// after it. Children that verifiedChildren let the ownership check skip are
// checked uncached once the spec builds them differently.
func (r *EmbeddingServerReconciler) planChildren(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	if r.waitForReplacedPods(scope) {
		return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
	}
	scope.rollout = planStorageRollout(scope, scope.children[0])
	seeds, recheck, err := r.planSeeds(ctx, scope)
	if err != nil {
		return ctrl.Result{}, err
	}
	scope.plan.seeds = seeds
	planned := &childrenPlan{apply: true, drains: scope.rollout.drains(), inUse: storagesInUse(scope)}
	if scope.binding != nil {
		planned.keep = scope.binding.Name
	}
	if scope.childrenVerified && scope.rollout == nil {
		same, err := r.desiredUnchanged(scope.server.UID, scope.children)
		if err != nil {
			scope.server.Status.Inventory = inventoryOf(scope.children)
			return ctrl.Result{}, err
		}
		planned.apply = !same
		if !same {
			if result, err := r.checkOwnershipUncached(ctx, scope); err != nil || scope.halted {
				return result, err
			}
		}
	}
	scope.plan.children = planned
	return ctrl.Result{RequeueAfter: recheck}, nil
}
