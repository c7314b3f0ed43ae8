package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/diagnose"
)

// reconcileProgress applies spec.progressDeadline as the Deployment
// controller applies progressDeadlineSeconds (kubernetes
// pkg/controller/deployment/progress.go, syncRolloutStatus): it keeps
// status.progress while the server is not Ready, and a server whose pods
// wait in a diagnosed state (degradedReasons) is progressing until the
// deadline passes without progress, Stalled with the pods' reason and a
// Warning event after. A stall holds until the server progresses, as a
// timed out Deployment stays so (DeploymentTimedOut), so a crash loop whose
// container is briefly running does not clear it. The controller keeps
// watching the pods: progress clears the stall.
func (r *EmbeddingServerReconciler) reconcileProgress(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if conditions.IsTrue(server, embedopsv1.ReadyCondition) {
		server.Status.Progress = nil
		return ctrl.Result{}, nil
	}
	now := r.now()
	ready, updated := replicaCounts(scope.statefulSet)
	server.Status.Progress = nextProgress(server.Status.Progress, server.Generation, ready, updated, now)
	deadline := server.GetProgressDeadline()
	waiting, found := waitingOn(server, scope.claimsWait, deadline)
	if !found {
		return ctrl.Result{}, nil
	}
	if remaining := untilDeadline(server.Status.Progress, deadline, now); remaining > 0 {
		return ctrl.Result{RequeueAfter: remaining}, nil
	}
	r.stallPastDeadline(scope, waiting)
	return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
}

// stallPastDeadline marks a server whose pods waited past its progress
// deadline: Stalled and Ready=False with the reason, and a Warning event
// with the same reason when the stall is new or its reason changed (a crash
// loop's message changes with every back-off; its event need not).
func (r *EmbeddingServerReconciler) stallPastDeadline(scope *serverScope, waiting diagnose.Diagnosis) {
	server := scope.server
	if !conditions.IsTrue(server, embedopsv1.StalledCondition) || conditions.GetReason(server, embedopsv1.StalledCondition) != waiting.Reason {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, waiting.Reason, "Reconcile", "%s", waiting.Message)
	}
	conditions.MarkStalled(server, waiting.Reason, "%s", waiting.Message)
	conditions.MarkFalse(server, embedopsv1.ReadyCondition, waiting.Reason, "%s", waiting.Message)
	scope.stalled = true
}

// replicaCounts are the StatefulSet's ready and updated replicas, zero when
// it does not exist.
func replicaCounts(statefulSet *appsv1.StatefulSet) (ready, updated int32) {
	if statefulSet == nil {
		return 0, 0
	}
	return statefulSet.Status.ReadyReplicas, statefulSet.Status.UpdatedReplicas
}

// nextProgress is the progress record of a server that is not Ready: the
// counts seen now, and the recorded time unless the server progressed. It
// progressed (DeploymentProgressing counts more updated, ready or available
// replicas; a new ReplicaSet restarts the clock) when there is no record
// (the server just left Ready, or is new), the generation changed (a new
// rollout), or the StatefulSet has more ready or updated replicas than
// recorded. Times are kept to the second, as the status stores them, so
// this reconcile measures as the next one will.
func nextProgress(recorded *embedopsv1.ServerProgress, generation int64, ready, updated int32, now time.Time) *embedopsv1.ServerProgress {
	next := &embedopsv1.ServerProgress{
		LastProgressTime: metav1.NewTime(now.Truncate(time.Second)),
		Generation:       generation,
		ReadyReplicas:    ready,
		UpdatedReplicas:  updated,
	}
	if recorded != nil && recorded.Generation == generation && ready <= recorded.ReadyReplicas && updated <= recorded.UpdatedReplicas {
		next.LastProgressTime = recorded.LastProgressTime
	}
	return next
}

// untilDeadline is how long is left until the deadline passes since the
// last progress; zero or less when it has.
func untilDeadline(progress *embedopsv1.ServerProgress, deadline time.Duration, now time.Time) time.Duration {
	return progress.LastProgressTime.Add(deadline).Sub(now)
}

// pastDeadline is the stall of a wait that outlived the deadline.
func pastDeadline(wait diagnose.Diagnosis, deadline time.Duration) diagnose.Diagnosis {
	message := strings.TrimSuffix(wait.Message, ".")
	return diagnose.Diagnosis{Reason: wait.Reason, Message: fmt.Sprintf("%s; no progress for %s (spec.progressDeadline)", message, deadline)}
}

// waitingOn is what a server that is not Ready waits on, as a stall would
// report it: the diagnosed reason on Ready, else a pod waiting for its
// claims to bind (claimsWait), else a stall for a diagnosed reason already
// reported, which holds until progress. found is false when
// the server waits on nothing the deadline applies to (pods starting, a
// download, a transient error).
func waitingOn(server *embedopsv1.EmbeddingServer, claimsWait *diagnose.Diagnosis, deadline time.Duration) (waiting diagnose.Diagnosis, found bool) {
	if reason := conditions.GetReason(server, embedopsv1.ReadyCondition); slices.Contains(degradedReasons, reason) {
		return pastDeadline(diagnose.Diagnosis{Reason: reason, Message: conditions.GetMessage(server, embedopsv1.ReadyCondition)}, deadline), true
	}
	if claimsWait != nil {
		return pastDeadline(*claimsWait, deadline), true
	}
	stalled := conditions.Get(server, embedopsv1.StalledCondition)
	if stalled != nil && stalled.Status == metav1.ConditionTrue && slices.Contains(degradedReasons, stalled.Reason) {
		return diagnose.Diagnosis{Reason: stalled.Reason, Message: stalled.Message}, true
	}
	return diagnose.Diagnosis{}, false
}
