package controller

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// DefaultFirstStatusWait bounds how long a new server's status may stay
// unwritten while all there is to say is that its pods are on their way
// (firstStatusWait).
const DefaultFirstStatusWait = time.Minute

// firstStatusWaitOf turns EmbeddingServerReconcilerOptions.FirstStatusWait
// into the wait the reconciler applies: 0 is the default, negative none.
func firstStatusWaitOf(wait time.Duration) time.Duration {
	switch {
	case wait == 0:
		return DefaultFirstStatusWait
	case wait < 0:
		return 0
	}
	return wait
}

// A new server's first status is, most of the time, written twice within
// seconds: "Initializing" at the first reconcile, then Ready. Until the
// controller's first write the API server shows status.observedGeneration
// -1 (the CRD's default), which kstatus, Flux's healthCheckExprs and the
// Argo CD health check all read as in progress, and kubectl wait as not
// Ready: the first write says nothing they do not already read. So a
// server whose status was never written leaves it unwritten while it has
// nothing but progress to report, for up to firstStatusWait from the
// creation of its StatefulSet, and its first status is then its Ready one
// (issue 27: a stored write per new server). The wait ends by
// spec.progressDeadline, whose clock (status.progress) starts with the
// first write, so a stall is reported at most one deadline late. Anything else is written at
// once: a failure, a stall, a diagnosed wait (an unschedulable pod, an
// image pull), a reconcile request to acknowledge, a child beyond those
// every server has (the inventory is the base of pruning).

// firstStatusLeft is how much longer the status the reconcile computed may
// stay unwritten (see above); zero or less means write it now.
func (r *EmbeddingServerReconciler) firstStatusLeft(scope *serverScope, reconcileErr error) time.Duration {
	if r.firstStatusWait <= 0 || reconcileErr != nil || scope.stalled || !scope.unwritten ||
		!onlyProgress(scope.server) || !onlyExpectedChildren(scope.server) ||
		scope.server.Status.LastHandledReconcileAt != scope.patcher.before.Status.LastHandledReconcileAt {
		return 0
	}
	wait := min(r.firstStatusWait, scope.server.GetProgressDeadline())
	return workStarted(scope).Add(wait).Sub(r.now())
}

// progressOnly are the condition states a new server's first status may
// leave unwritten: good news, progress, or a source that is unknown
// (a server applied without git; its Warning event is sent at once).
var progressOnly = map[string][]string{
	embedopsv1.ReadyCondition:          {embedopsv1.InitializingReason, embedopsv1.DownloadingReason},
	embedopsv1.ReconcilingCondition:    {embedopsv1.ProgressingReason},
	embedopsv1.AcceptedCondition:       {embedopsv1.ValidReason},
	embedopsv1.CacheReadyCondition:     {embedopsv1.BoundReason, embedopsv1.PendingReason},
	embedopsv1.ModelReadyCondition:     {embedopsv1.DownloadingReason, embedopsv1.DownloadedReason},
	embedopsv1.SourceResolvedCondition: {embedopsv1.SourceResolvedReason, embedopsv1.SourcePendingReason, embedopsv1.SourceUnknownReason},
}

// onlyProgress checks that every condition is one of progressOnly, and
// that Ready is not True: Ready is the write the wait is for.
func onlyProgress(server *embedopsv1.EmbeddingServer) bool {
	for _, condition := range server.Status.Conditions {
		if !slices.Contains(progressOnly[condition.Type], condition.Reason) ||
			(condition.Type == embedopsv1.ReadyCondition && condition.Status == metav1.ConditionTrue) {
			return false
		}
	}
	return true
}

// onlyExpectedChildren checks that the inventory lists no child but those
// every server has, which no prune ever deletes from a live server: a
// child that may be pruned later must be recorded now.
func onlyExpectedChildren(server *embedopsv1.EmbeddingServer) bool {
	if server.Status.Inventory == nil {
		return true
	}
	expected := expectedChildren(server)
	for _, entry := range server.Status.Inventory.Entries {
		if !slices.ContainsFunc(expected, func(e embedopsv1.ResourceRef) bool { return e.ID == entry.ID }) {
			return false
		}
	}
	return true
}

// workStarted is when the controller began the server's pods: the creation
// of its StatefulSet, as the cache or this reconcile's apply showed it,
// else the server's own creation.
func workStarted(scope *serverScope) time.Time {
	if scope.statefulSet != nil {
		return scope.statefulSet.CreationTimestamp.Time
	}
	if created := scope.created[statefulSetRef(scope.server).ID]; created != nil {
		return created.GetCreationTimestamp().Time
	}
	return scope.server.CreationTimestamp.Time
}
