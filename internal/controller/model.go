package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/populate"
)

// populateMessage is the JSON `embedops populate --termination-log` leaves
// as the populate init container's termination message: the result on
// success, {"error": ..., "reason": ...} on failure (populate.FailureReason).
type populateMessage struct {
	populate.Result
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// populateOutcome is what one pod's populate init container reports.
type populateOutcome struct {
	pod string
	// done: it exited 0 with a readable result; failed: it exited non-zero,
	// or 0 with an unreadable result. Neither: it is downloading.
	done, failed bool
	result       populateMessage
	// detail says why it failed; diskFull: the claim had no space left
	// (populate.DiskFullReason).
	detail   string
	diskFull bool
}

// modelReport is the ModelReady condition the pods support, and what they
// realized.
type modelReport struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	// realized is the commit and digest the binding should record when it
	// has not yet: those of the first pod, by name, that finished; nil when
	// none did or the binding recorded both.
	realized *embedopsv1.RealizedCache
	// mismatched are the pods whose resolved commit differs from the one
	// recorded (or about to be): the binding is not overwritten.
	mismatched []string
	// mismatchNote is the part of message that tells of mismatched.
	mismatchNote string
}

// planRealized reads the populate init containers of the server's pods
// (modelReportOf) for reconcileModel, and plans the record of the commit
// and content digest they realized, which the binding keeps once.
// Without the populate init container nothing is read.
func (r *EmbeddingServerReconciler) planRealized(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	if scope.cache == nil || !scope.cache.Populated() || scope.binding == nil || scope.cache.Mode == embedopsv1.CacheModeShared {
		return ctrl.Result{}, nil
	}
	pods := scope.observed.podsMounting(scope.cache.Binding)
	report, ok := modelReportOf(pods, scope.binding.Status.Realized)
	if ok {
		scope.modelReport = &report
		scope.plan.realized = withLeastRoom(report.realized, scope.binding.Status.Realized, pods, scope.server.GetReplicas())
		planOutOfRoom(scope, pods)
	}
	return ctrl.Result{}, nil
}

// reconcileModel sets ModelReady from the populate init containers of the
// server's pods (planRealized read them, and the act step recorded what
// they realized) and warns, once per mismatch, when pods resolved
// different commits. Without the populate init container ModelReady is
// not reported.
func (r *EmbeddingServerReconciler) reconcileModel(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if scope.cache == nil || !scope.cache.Populated() || scope.binding == nil {
		conditions.Delete(server, embedopsv1.ModelReadyCondition)
		return ctrl.Result{}, nil
	}
	if scope.cache.Mode == embedopsv1.CacheModeShared {
		return ctrl.Result{}, nil // reportPopulated reported the shared cache.
	}
	report := scope.modelReport
	if report == nil {
		if server.GetReplicas() > 0 {
			conditions.MarkFalse(server, embedopsv1.ModelReadyCondition, embedopsv1.DownloadingReason,
				"waiting for the pods to start the %s init container", builder.PopulateContainerName)
		}
		return ctrl.Result{}, nil
	}
	before := conditions.Get(server, embedopsv1.ModelReadyCondition).DeepCopy()
	if report.status == metav1.ConditionTrue {
		conditions.MarkTrue(server, embedopsv1.ModelReadyCondition, report.reason, "%s", report.message)
	} else {
		conditions.MarkFalse(server, embedopsv1.ModelReadyCondition, report.reason, "%s", report.message)
	}
	if report.reason == embedopsv1.DownloadingReason && conditions.GetReason(server, embedopsv1.ReadyCondition) == embedopsv1.InitializingReason {
		conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.DownloadingReason, "%s", report.message)
	}
	if report.mismatchNote != "" && (before == nil || !strings.Contains(before.Message, report.mismatchNote)) {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, embedopsv1.ResolvedCommitMismatchReason, "Reconcile", "%s", report.message)
	}
	return ctrl.Result{}, nil
}

// recordRealized has the ledger fill the binding's unset realized fields
// with found, when not nil; they are immutable once set.
func (r *EmbeddingServerReconciler) recordRealized(ctx context.Context, scope *serverScope, found *embedopsv1.RealizedCache) error {
	if found == nil {
		return nil
	}
	commit, err := r.ledger.RecordRealized(ctx, scope.binding, found)
	if err != nil {
		return err
	}
	scope.resolvedCommit = commit
	return nil
}

// modelReportOf reads the populate init containers of pods against what the
// binding recorded (nil when nothing): DownloadFailed when one failed,
// Downloading while one runs, Downloaded when all finished. ok is false when
// no pod reports a populate init container.
func modelReportOf(pods []corev1.Pod, recorded *embedopsv1.RealizedCache) (modelReport, bool) {
	var outcomes []populateOutcome
	for i := range pods {
		if outcome, ok := populateOutcomeOf(&pods[i]); ok {
			outcomes = append(outcomes, outcome)
		}
	}
	if len(outcomes) == 0 {
		return modelReport{}, false
	}
	slices.SortFunc(outcomes, func(a, b populateOutcome) int { return strings.Compare(a.pod, b.pod) })
	report := modelReport{}
	commit, digest := "", ""
	if recorded != nil {
		commit, digest = recorded.ResolvedCommit, recorded.ContentDigest
	}
	var done, downloading []populateOutcome
	var failed *populateOutcome
	for i, outcome := range outcomes {
		switch {
		case outcome.failed:
			if failed == nil {
				failed = &outcomes[i]
			}
		case outcome.done:
			done = append(done, outcome)
		default:
			downloading = append(downloading, outcome)
		}
	}
	if len(done) > 0 {
		first := done[0].result
		if commit == "" {
			commit = first.ResolvedCommit
		}
		if digest == "" && first.ResolvedCommit == commit {
			digest = first.ContentDigest
		}
		if recorded == nil || recorded.ResolvedCommit != commit || recorded.ContentDigest != digest {
			report.realized = &embedopsv1.RealizedCache{ResolvedCommit: commit, ContentDigest: digest}
			if first.ResolvedCommit == commit && first.ContentDigest == digest {
				report.realized = realizedOf(first.Result)
			}
		}
	}
	var others []string
	for _, outcome := range done {
		if outcome.result.ResolvedCommit != commit {
			report.mismatched = append(report.mismatched, outcome.pod)
			others = append(others, outcome.pod+" resolved "+outcome.result.ResolvedCommit)
		}
	}
	switch {
	case failed != nil:
		report.status, report.reason = metav1.ConditionFalse, embedopsv1.DownloadFailedReason
		report.message = fmt.Sprintf("pod %s: %s", failed.pod, failed.detail)
	case len(downloading) > 0:
		report.status, report.reason = metav1.ConditionFalse, embedopsv1.DownloadingReason
		report.message = fmt.Sprintf("%d/%d pods downloading the model", len(downloading), len(outcomes))
	default:
		report.status, report.reason = metav1.ConditionTrue, embedopsv1.DownloadedReason
		report.message = fmt.Sprintf("model commit %s is in the cache of %d pods", commit, len(done))
	}
	if len(others) > 0 {
		report.mismatchNote = fmt.Sprintf("resolved commit mismatch: %s, the binding keeps %s", strings.Join(others, ", "), commit)
		report.message += "; " + report.mismatchNote
	}
	return report, true
}

// populateOutcomeOf reads the pod's populate container: the init container
// of a PerReplica pod or the only container of a populate Job's pod; ok is
// false when the pod has none. A container waiting to restart after a
// failure counts as failed.
func populateOutcomeOf(pod *corev1.Pod) (populateOutcome, bool) {
	status, ok := populateStatusOf(pod)
	if !ok {
		return populateOutcome{}, false
	}
	outcome := populateOutcome{pod: pod.Name}
	terminated := status.State.Terminated
	if terminated == nil && status.State.Waiting != nil {
		if last := status.LastTerminationState.Terminated; last != nil && last.ExitCode != 0 {
			terminated = last
		}
	}
	if terminated == nil {
		return outcome, true
	}
	var message populateMessage
	decodeErr := json.Unmarshal([]byte(terminated.Message), &message)
	switch {
	case terminated.ExitCode != 0:
		outcome.failed = true
		outcome.detail = failureDetail(terminated, message, decodeErr)
		outcome.diskFull = decodeErr == nil && message.Reason == populate.DiskFullReason
	case decodeErr != nil || !message.Recordable():
		outcome.failed = true
		outcome.detail = fmt.Sprintf("%s exited 0 without a readable result in its termination message", builder.PopulateContainerName)
	default:
		outcome.done, outcome.result = true, message
	}
	return outcome, true
}

// failureDetail is the error the populator wrote, else the raw termination
// message, else the kubelet's reason and exit code.
func failureDetail(terminated *corev1.ContainerStateTerminated, message populateMessage, decodeErr error) string {
	switch {
	case decodeErr == nil && message.Error != "":
		return message.Error
	case strings.TrimSpace(terminated.Message) != "":
		return strings.TrimSpace(terminated.Message)
	default:
		return fmt.Sprintf("%s exited with code %d (%s)", builder.PopulateContainerName, terminated.ExitCode, terminated.Reason)
	}
}

// populateStatusOf finds the status of the pod's populate container.
func populateStatusOf(pod *corev1.Pod) (corev1.ContainerStatus, bool) {
	isPopulate := func(s corev1.ContainerStatus) bool { return s.Name == builder.PopulateContainerName }
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		if i := slices.IndexFunc(statuses, isPopulate); i >= 0 {
			return statuses[i], true
		}
	}
	return corev1.ContainerStatus{}, false
}

// realizedOf is what a populate result gives a binding to record: the
// commit, the content digest, the bytes, the room its claim has left and,
// when they fit the schema's bounds, the file names.
func realizedOf(result populate.Result) *embedopsv1.RealizedCache {
	realized := &embedopsv1.RealizedCache{ResolvedCommit: result.ResolvedCommit, ContentDigest: result.ContentDigest}
	if result.Bytes > 0 {
		realized.Bytes = new(result.Bytes)
	}
	if recordableFiles(result.Names) {
		realized.Files = slices.Clone(result.Names)
	}
	if result.FreeBytes != nil {
		realized.FreeBytes, realized.ReclaimableBytes = new(*result.FreeBytes), new(ptr.Deref(result.ReclaimableBytes, 0))
	}
	return realized
}

// recordableFiles reports whether names fit status.realized.files: a set,
// within its bounds.
func recordableFiles(names []string) bool {
	if len(names) == 0 || len(names) > embedopsv1.MaxRealizedFiles {
		return false
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i, name := range sorted {
		if name == "" || len(name) > embedopsv1.MaxRealizedFileNameLength || (i > 0 && sorted[i-1] == name) {
			return false
		}
	}
	return true
}
