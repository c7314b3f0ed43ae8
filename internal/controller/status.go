package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/act"
	"github.com/embedops/embedops/internal/controller/diagnose"
	"github.com/embedops/embedops/internal/controller/metrics"
)

// ownedConditions are the condition types this reconciler writes; the status
// patch overwrites them on conflict.
var ownedConditions = []string{
	embedopsv1.ReadyCondition,
	embedopsv1.ReconcilingCondition,
	embedopsv1.StalledCondition,
	embedopsv1.AcceptedCondition,
	embedopsv1.CacheReadyCondition,
	embedopsv1.ModelReadyCondition,
	embedopsv1.SourceResolvedCondition,
}

// degradedReasons are the Ready=False reasons of failing pods: the phase is
// Degraded while the server waits on them, and they stall it once
// spec.progressDeadline passes without progress (reconcileProgress).
var degradedReasons = []string{
	embedopsv1.RolloutWaitingForUnreadyReason,
	embedopsv1.ImagePullBackOffReason,
	embedopsv1.ErrImagePullReason,
	embedopsv1.CrashLoopBackOffReason,
	embedopsv1.CreateContainerConfigErrorReason,
	embedopsv1.OOMKilledReason,
	embedopsv1.UnschedulableReason,
	embedopsv1.EndpointUnavailableReason,
}

// stall marks a server that needs a human: Stalled and Ready=False with the
// reason, a Warning event with the same reason, and a terminal error.
func (r *EmbeddingServerReconciler) stall(scope *serverScope, reason string, err error) error {
	conditions.MarkStalled(scope.server, reason, "%s", err.Error())
	conditions.MarkFalse(scope.server, embedopsv1.ReadyCondition, reason, "%s", err.Error())
	r.events.Eventf(scope.server, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", err.Error())
	return reconcile.TerminalError(err)
}

// stallAndPoll marks a server that needs a human to change something
// embedops does not watch (a foreign object in a child's name, a missing
// Secret): Stalled and Ready=False with the reason and a Warning event when
// the stall is new, then the remaining phases are held and the caller
// requeues to look again.
func (r *EmbeddingServerReconciler) stallAndPoll(scope *serverScope, reason string, err error) {
	server := scope.server
	if conditions.GetReason(server, embedopsv1.StalledCondition) != reason || conditions.GetMessage(server, embedopsv1.StalledCondition) != err.Error() {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", err.Error())
	}
	conditions.MarkStalled(server, reason, "%s", err.Error())
	conditions.MarkFalse(server, embedopsv1.ReadyCondition, reason, "%s", err.Error())
	scope.halted, scope.stalled = true, true
}

// reconcileReadiness reports the StatefulSet's replicas and the server's URL
// and sets Ready; it waits while pods are not ready.
func (r *EmbeddingServerReconciler) reconcileReadiness(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	statefulSet := scope.observed.statefulSet(cmp.Or(scope.statefulSetName, server.Name))
	server.Status.URL = serviceURL(scope.service, r.clusterDomain)
	server.Status.EndpointCheck = endpointCheckState(r.endpointCheck)
	if !r.endpointCheck || server.GetReplicas() == 0 {
		server.Status.Served = nil
	}
	server.Status.Replicas, server.Status.ReadyReplicas = 0, 0
	scope.statefulSet = statefulSet
	if statefulSet != nil {
		server.Status.Replicas, server.Status.ReadyReplicas = statefulSet.Status.Replicas, statefulSet.Status.ReadyReplicas
	}
	avail := availabilityOf(server.GetReplicas(), statefulSet, statefulSet == nil || r.rollouts.seen(server.UID, statefulSet))
	if scope.rollout != nil {
		for _, old := range scope.rollout.old {
			server.Status.Replicas += old.Status.Replicas
			server.Status.ReadyReplicas += old.Status.ReadyReplicas
		}
		// Once no old StatefulSet keeps a replica, the new one's pods are
		// the server's; the old ones go once their pods are gone. In place
		// (maxSurge 0) the move is said until the new pods are ready: a
		// single replica gives up its only pod at the first step.
		if !scope.rollout.step.Done() || (surgeOf(server) == 0 && !avail.ready) {
			avail = availability{false, embedopsv1.InitializingReason, rolloutMessage(r.whyNewStorage(ctx, scope), scope, statefulSet)}
		}
		if held := scope.rollout.step.Held; held != nil {
			avail = r.reportHold(scope, held, avail.message)
		}
	}
	if avail.ready {
		conditions.MarkTrue(server, embedopsv1.ReadyCondition, avail.reason, "%s", avail.message)
		return ctrl.Result{}, nil
	}
	conditions.MarkFalse(server, embedopsv1.ReadyCondition, avail.reason, "%s", avail.message)
	return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
}

// reconcileDiagnostics replaces Ready=False Initializing by what the pods
// report, when one of them is failing; a pod that waits only for its claims
// to bind is not failing (scope.claimsWait).
func (r *EmbeddingServerReconciler) reconcileDiagnostics(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if conditions.IsTrue(server, embedopsv1.ReadyCondition) {
		return ctrl.Result{}, nil
	}
	pods := scope.observed.pods
	found := diagnose.Pods(pods)
	if found != nil && conditions.GetReason(server, embedopsv1.ReadyCondition) == embedopsv1.RolloutWaitingForUnreadyReason {
		// The hold names the pod it waits on; what fails in it is added.
		conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.RolloutWaitingForUnreadyReason, "%s; %s",
			conditions.GetMessage(server, embedopsv1.ReadyCondition), found.Message)
	} else if found != nil {
		conditions.MarkFalse(server, embedopsv1.ReadyCondition, found.Reason, "%s", found.Message+surgeAdvice(scope, found))
	} else {
		scope.claimsWait = diagnose.WaitingForClaims(pods)
	}
	return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
}

// availability is the Ready condition the StatefulSet supports.
type availability struct {
	ready   bool
	reason  string
	message string
}

// availabilityOf compares the ready replicas of the StatefulSet (nil when it
// does not exist yet) with the desired replicas: Available when all are
// ready at the StatefulSet's update revision, ScaledToZero when none are
// desired and none run, Initializing otherwise. A StatefulSet the cache has
// not caught up with (seen false: this process changed it since), or whose
// status is of an older generation (and so may count replicas of the old
// pod template), is not trusted.
func availabilityOf(desired int32, statefulSet *appsv1.StatefulSet, seen bool) availability {
	switch {
	case desired == 0 && (statefulSet == nil || statefulSet.Status.Replicas == 0):
		return availability{true, embedopsv1.ScaledToZeroReason, "scaled to zero replicas"}
	case statefulSet == nil:
		return availability{false, embedopsv1.InitializingReason, fmt.Sprintf("0/%d replicas ready", desired)}
	}
	progress := fmt.Sprintf("%d/%d replicas ready", statefulSet.Status.ReadyReplicas, desired)
	switch {
	case desired == 0:
		return availability{false, embedopsv1.InitializingReason, fmt.Sprintf("scaling to zero: %d replicas remain", statefulSet.Status.Replicas)}
	case !seen:
		return availability{false, embedopsv1.InitializingReason, progress + "; waiting to observe the StatefulSet just applied"}
	case statefulSet.Status.ObservedGeneration < statefulSet.Generation && statefulSet.Status.ObservedGeneration > 0:
		// A StatefulSet never observed has no status, so no ready replica
		// either: it reads as the plain progress below, as before it was
		// created, and a new server's first observation is not written twice.
		return availability{false, embedopsv1.InitializingReason, fmt.Sprintf("%s; StatefulSet generation %d not observed yet", progress, statefulSet.Generation)}
	case statefulSet.Status.ReadyReplicas < desired:
		return availability{false, embedopsv1.InitializingReason, progress}
	}
	if rollout := rolloutInProgress(statefulSet); rollout != "" {
		return availability{false, embedopsv1.InitializingReason, progress + "; rolling out: " + rollout}
	}
	return availability{true, embedopsv1.AvailableReason, progress}
}

// clusterDomain is the configured cluster DNS domain without a trailing dot,
// DefaultClusterDomain when empty; anything but a DNS subdomain is refused.
func clusterDomain(configured string) (string, error) {
	if configured == "" {
		return DefaultClusterDomain, nil
	}
	domain := strings.TrimSuffix(configured, ".")
	if problems := validation.IsDNS1123Subdomain(domain); len(problems) > 0 {
		return "", fmt.Errorf("invalid cluster domain %q: %s", configured, strings.Join(problems, "; "))
	}
	return domain, nil
}

// serviceURL is the in-cluster address of the client Service in a cluster
// whose DNS domain is domain.
func serviceURL(service *corev1.Service, domain string) string {
	if service == nil || len(service.Spec.Ports) == 0 {
		return ""
	}
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", service.Name, service.Namespace, domain, service.Spec.Ports[0].Port)
}

// finalizeStatus completes the kstatus conditions from the outcome, derives
// the phase, emits transition events and writes the status in one patch.
// observedGeneration is set when the generation was fully handled: on
// success and on a terminal error, which only a new spec (or a referenced
// object) can change.
func (r *EmbeddingServerReconciler) finalizeStatus(ctx context.Context, scope *serverScope, patcher *act.ServerPatcher, reconcileErr error) error {
	server := scope.server
	deleting := !server.DeletionTimestamp.IsZero()
	terminal := errors.Is(reconcileErr, reconcile.TerminalError(nil))
	switch {
	case deleting:
	case reconcileErr == nil && scope.stalled:
	case reconcileErr == nil && conditions.IsTrue(server, embedopsv1.ReadyCondition):
		conditions.Delete(server, embedopsv1.StalledCondition)
		conditions.Delete(server, embedopsv1.ReconcilingCondition)
	case reconcileErr == nil:
		conditions.MarkReconciling(server, embedopsv1.ProgressingReason, "%s", conditions.GetMessage(server, embedopsv1.ReadyCondition))
	case !terminal:
		conditions.MarkReconciling(server, embedopsv1.ProgressingWithRetryReason, "%s", reconcileErr.Error())
		conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.ProgressingWithRetryReason, "%s", reconcileErr.Error())
	}
	server.Status.Phase = serverPhase(server, scope.phaseBefore)
	if reconcileErr != nil {
		metrics.CountFailure(conditions.GetReason(server, embedopsv1.ReadyCondition))
	}
	if !deleting {
		r.eventReadyTransition(scope)
	}
	patchErr := patcher.Patch(ctx, server, act.PatchOptions{ObservedGeneration: !deleting && (reconcileErr == nil || terminal)})
	if deleting {
		// Without the finalizer the server may be gone before its status.
		patchErr = kerrors.FilterOut(patchErr, apierrors.IsNotFound)
	}
	r.recordStatusMetrics(ctx, server)
	if patchErr != nil {
		return errors.Join(reconcileErr, fmt.Errorf("patching the status: %w", patchErr))
	}
	return reconcileErr
}

// recordStatusMetrics exports the server's Ready, Reconciling and Stalled
// conditions as Flux's controllers do.
func (r *EmbeddingServerReconciler) recordStatusMetrics(ctx context.Context, server *embedopsv1.EmbeddingServer) {
	r.metrics.RecordReadiness(ctx, server)
	r.metrics.RecordReconciling(ctx, server)
	r.metrics.RecordStalled(ctx, server)
}

// eventReadyTransition emits a Normal event when Ready turns True from a
// failure or a diagnosed wait (a recovery), or changes its True reason.
// Failures have their Warning events from the stall that reports them:
// failing pods are progress until spec.progressDeadline, so they are
// announced when it passes (reconcileProgress), not before. Ready reached
// by progress alone (from Initializing or Downloading: a new server, a
// rollout, a scale-up) is no event, as a Deployment's availability is none:
// the condition says it, and Flux and Argo CD report it from there. Each
// event is a stored write (issue 27).
func (r *EmbeddingServerReconciler) eventReadyTransition(scope *serverScope) {
	ready := conditions.Get(scope.server, embedopsv1.ReadyCondition)
	if announcesReady(scope.readyBefore, ready) {
		r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, ready.Reason, "Reconcile", "%s", ready.Message)
	}
}

// announcesReady reports whether Ready, once before, now ready, is a
// recovery or a new True reason: True now, and before True for another
// reason or False for a reason other than progress.
func announcesReady(before, ready *metav1.Condition) bool {
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue || before == nil:
		return false
	case before.Status == metav1.ConditionTrue:
		return before.Reason != ready.Reason
	}
	return before.Reason != embedopsv1.InitializingReason && before.Reason != embedopsv1.DownloadingReason
}

// serverPhase derives status.phase from the conditions alone, so the same
// conditions always give the same phase. A transient error keeps the
// previous phase rather than flapping to Pending.
func serverPhase(server *embedopsv1.EmbeddingServer, previous embedopsv1.ServerPhase) embedopsv1.ServerPhase {
	readyReason := conditions.GetReason(server, embedopsv1.ReadyCondition)
	switch {
	case !server.DeletionTimestamp.IsZero():
		return embedopsv1.PhaseTerminating
	case conditions.IsTrue(server, embedopsv1.StalledCondition):
		return embedopsv1.PhaseFailed
	case conditions.IsTrue(server, embedopsv1.ReadyCondition) && readyReason == embedopsv1.ScaledToZeroReason:
		return embedopsv1.PhaseScaledToZero
	case conditions.IsTrue(server, embedopsv1.ReadyCondition):
		return embedopsv1.PhaseReady
	case slices.Contains(degradedReasons, readyReason):
		return embedopsv1.PhaseDegraded
	case readyReason == embedopsv1.DownloadingReason,
		conditions.IsFalse(server, embedopsv1.ModelReadyCondition) && conditions.GetReason(server, embedopsv1.ModelReadyCondition) == embedopsv1.DownloadingReason:
		return embedopsv1.PhaseDownloading
	case readyReason == embedopsv1.ProgressingWithRetryReason && previous != "":
		return previous
	default:
		return embedopsv1.PhasePending
	}
}
