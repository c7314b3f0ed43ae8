package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/controller/diagnose"
)

// DefaultPopulateDeadline is --populate-deadline's default: as long as a
// PerReplica pod's startup probe lets TEI download before it is restarted
// (builder: 10s x 360).
const DefaultPopulateDeadline = time.Hour

// populateRetryAfter is how long a failed populate Job is kept, for its
// status and its pod's logs, before it is deleted and created again.
const populateRetryAfter = 5 * time.Minute

// reconcilePopulate runs the binding's populate Job before any server
// starts on it, and holds the remaining phases until it succeeded, so a new
// server has no StatefulSet yet and a server moving to a new binding keeps
// running on its old one. A Shared claim is filled once by the Job; a
// PerReplica binding's Job only resolves the revision to a commit
// (builder.ResolvesFirst), so every replica starts on that commit and the
// StatefulSet rolls out once. The Job's result is recorded on the binding;
// ModelReady tells the server's side.
func (r *EmbeddingServerReconciler) reconcilePopulate(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	cache, binding := scope.cache, scope.binding
	if cache == nil || binding == nil || !cache.Populated() {
		return ctrl.Result{}, nil
	}
	switch cache.Mode {
	case embedopsv1.CacheModeShared:
		if realized := binding.Status.Realized; realized != nil && realized.ResolvedCommit != "" {
			return ctrl.Result{}, nil // filled: reportPopulated says so.
		}
	case embedopsv1.CacheModePerReplica:
		cache.ResolvedCommit = scope.resolvedCommit
		if !builder.ResolvesFirst(scope.server, cache) {
			return ctrl.Result{}, nil
		}
	default:
		return ctrl.Result{}, nil
	}
	job, create, err := r.populateJob(ctx, scope)
	if errors.Is(err, builder.ErrInvalidPodTemplate) {
		// The Job's pod is built from the server's: a pod template
		// refused there stalls the server as buildChildren would.
		return ctrl.Result{}, r.refuseSpec(scope, err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if isJobFinished(job, batchv1.JobComplete) {
		return r.recordJobResult(ctx, scope, job)
	}
	if isJobFinished(job, batchv1.JobFailed) {
		return r.retryFailedJob(ctx, scope, job, r.jobFailure(ctx, job))
	}
	message := runningJobMessage(scope, job)
	// A Job only planned (create) has no pods to ask about yet.
	if !create {
		if waiting, err := r.jobPodWaiting(ctx, job); err != nil {
			return ctrl.Result{}, err
		} else if waiting != nil {
			message = fmt.Sprintf("populate Job %s cannot run yet: %s (it fails after --populate-deadline, then the server reports why)", job.Name, waiting.Message)
		}
	}
	write := &populateWrite{reason: embedopsv1.DownloadingReason, message: message}
	if create {
		write.create, write.created = job, jobCreatedMessage(scope, job.Name)
	}
	holdForPopulate(scope, write)
	return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
}

// jobCreatedMessage is the event of a new populate Job.
func jobCreatedMessage(scope *serverScope, job string) string {
	model := scope.server.Spec.Model.Name
	switch {
	case scope.cache.Mode == embedopsv1.CacheModePerReplica:
		return fmt.Sprintf("created Job %s to resolve %s at %s on the hub before the pods start", job, model, builder.ServedRevision(scope.server, scope.cache))
	case scope.cache.Existing:
		return fmt.Sprintf("created Job %s to verify, offline, that the existing claim %s holds %s at %s before the pods start",
			job, scope.cache.ClaimName, model, builder.ServedRevision(scope.server, scope.cache))
	}
	return fmt.Sprintf("created Job %s to download %s into the shared cache %s", job, model, scope.cache.ClaimName)
}

// cacheDescription names a Shared cache in messages: the binding's claim,
// or the user's existing one.
func cacheDescription(cache *builder.Cache) string {
	if cache.Existing {
		return "the existing claim " + cache.ClaimName
	}
	return "the shared cache " + cache.ClaimName
}

// runningJobMessage says what the running populate Job does.
func runningJobMessage(scope *serverScope, job *batchv1.Job) string {
	model := scope.server.Spec.Model
	if scope.cache.Mode == embedopsv1.CacheModePerReplica {
		return fmt.Sprintf("populate Job %s is resolving %s at %s on the hub, so every replica starts on one commit",
			job.Name, model.Name, builder.ServedRevision(scope.server, scope.cache))
	}
	if scope.cache.Existing {
		return fmt.Sprintf("verify Job %s is checking that the existing claim %s holds %s at %s",
			job.Name, scope.cache.ClaimName, model.Name, builder.ServedRevision(scope.server, scope.cache))
	}
	return fmt.Sprintf("populate Job %s is downloading %s into the shared cache %s", job.Name, model.Name, scope.cache.ClaimName)
}

// jobPodWaiting is why the running Job's pod does not run (an image it
// cannot pull, no node that takes it), as the server's pods are diagnosed,
// or nil. The pods are read uncached: the cache holds only servers' pods.
func (r *EmbeddingServerReconciler) jobPodWaiting(ctx context.Context, job *batchv1.Job) (*diagnose.Diagnosis, error) {
	var pods corev1.PodList
	if err := r.apiReader.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	return diagnose.Pods(pods.Items), nil
}

// populateJob returns the binding's populate Job, read from the cache by
// name (the binding was chosen after observe), or, when absent, the Job to
// create and true. An existing Job is never updated: its pod template is
// immutable, and the first server's request is the binding's.
func (r *EmbeddingServerReconciler) populateJob(ctx context.Context, scope *serverScope) (*batchv1.Job, bool, error) {
	key := types.NamespacedName{Namespace: scope.binding.Namespace, Name: builder.PopulateJobName(scope.binding.Name)}
	job := &batchv1.Job{}
	err := r.client.Get(ctx, key, job)
	if err == nil || !apierrors.IsNotFound(err) {
		return job, false, client.IgnoreNotFound(err)
	}
	facts, err := r.factsOf(ctx, scope)
	if err != nil {
		return nil, false, err
	}
	desired, err := builder.PopulateJob(scope.server, scope.binding, scope.cache, facts)
	if err != nil {
		return nil, false, err
	}
	return desired, true, nil
}

// recordJobResult plans the record of the succeeded Job's result on the
// binding, which the act step writes before the children are built on its
// commit (reportPopulated reports it). A Job that succeeded without a
// readable result is reported as a failure.
func (r *EmbeddingServerReconciler) recordJobResult(ctx context.Context, scope *serverScope, job *batchv1.Job) (ctrl.Result, error) {
	outcome, err := r.jobOutcome(ctx, job, func(o populateOutcome) bool { return o.done })
	if err != nil {
		return ctrl.Result{}, err
	}
	if outcome == nil || !outcome.done {
		detail := fmt.Sprintf("Job %s completed but no pod left a readable result in its termination message", job.Name)
		return r.retryFailedJob(ctx, scope, job, detail)
	}
	found := realizedOf(outcome.result.Result)
	if scope.cache.Mode == embedopsv1.CacheModePerReplica {
		// Only the commit: the replicas' init containers record what they
		// cached of it (decision.MergeRealized fills the rest).
		found = &embedopsv1.RealizedCache{ResolvedCommit: outcome.result.ResolvedCommit}
		if err := r.checkListedRoom(ctx, scope, outcome.result.Result); err != nil {
			return ctrl.Result{}, err
		}
	}
	scope.plan.populated = found
	return ctrl.Result{}, nil
}

// reportPopulated reports a filled Shared cache on ModelReady, with the
// commit the binding recorded: earlier, or by this reconcile's act step
// from the populate Job's result. A PerReplica server's pods are built on
// that commit instead (buildChildren), and report it themselves.
func (r *EmbeddingServerReconciler) reportPopulated(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	cache := scope.cache
	if cache == nil || !cache.Populated() || cache.Mode != embedopsv1.CacheModeShared || scope.resolvedCommit == "" {
		return ctrl.Result{}, nil
	}
	conditions.MarkTrue(scope.server, embedopsv1.ModelReadyCondition, embedopsv1.DownloadedReason,
		"model commit %s is in %s", scope.resolvedCommit, cacheDescription(scope.cache))
	return ctrl.Result{}, nil
}

// retryFailedJob plans the failure's report and holds the server; once the
// Job has failed for populateRetryAfter it is planned for deletion, so the
// next reconcile runs it again. A failed verify Job of an existing claim
// stalls the server as ModelNotInClaim: the claim lacks the model, which
// only its user can fix.
func (r *EmbeddingServerReconciler) retryFailedJob(ctx context.Context, scope *serverScope, job *batchv1.Job, detail string) (ctrl.Result, error) {
	before := conditions.Get(scope.server, embedopsv1.ModelReadyCondition)
	reason, message := embedopsv1.DownloadFailedReason, fmt.Sprintf("populate Job %s failed: %s", job.Name, detail)
	if scope.cache.Existing {
		reason = embedopsv1.ModelNotInClaimReason
		message = fmt.Sprintf("the existing claim %s does not hold %s at %s (verify Job %s): %s",
			scope.cache.ClaimName, scope.server.Spec.Model.Name, builder.ServedRevision(scope.server, scope.cache), job.Name, detail)
	}
	write := &populateWrite{reason: reason, message: message, warn: before == nil || before.Reason != reason || before.Message != message}
	holdForPopulate(scope, write)
	if scope.cache.Existing {
		// Only a human can fill the claim: Stalled, and verified again
		// below once the failed Job is old enough.
		conditions.MarkStalled(scope.server, reason, "%s", message)
		scope.stalled = true
	}
	wait := populateRetryAfter - r.now().Sub(jobFinishedAt(job))
	if wait > 0 && !r.requestChanged(ctx, scope, job) {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	write.retry = job
	return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
}

// requestChanged reports whether the server now asks the populator for
// something else than the failed Job did (another token Secret, hub
// endpoint, proxy or CA bundle): then the Job is retried at once, with the
// current request.
func (r *EmbeddingServerReconciler) requestChanged(ctx context.Context, scope *serverScope, job *batchv1.Job) bool {
	facts, err := r.factsOf(ctx, scope)
	if err != nil {
		return false
	}
	desired, err := builder.PopulateJob(scope.server, scope.binding, scope.cache, facts)
	if err != nil || len(job.Spec.Template.Spec.Containers) == 0 {
		return false
	}
	want, have := desired.Spec.Template.Spec.Containers[0].Env, job.Spec.Template.Spec.Containers[0].Env
	return !equality.Semantic.DeepEqual(want, have)
}

// holdForPopulate plans the populate Job's write, which reports the
// download on ModelReady and Ready (reportPopulate), and stops the
// remaining phases.
func holdForPopulate(scope *serverScope, write *populateWrite) {
	scope.plan.populate = write
	scope.halted = true
}

// reportPopulate reports the populate Job's download, or its failure, on
// ModelReady and Ready.
func reportPopulate(server *embedopsv1.EmbeddingServer, reason, message string) {
	conditions.MarkFalse(server, embedopsv1.ModelReadyCondition, reason, "%s", message)
	conditions.MarkFalse(server, embedopsv1.ReadyCondition, reason, "%s", message)
}

// jobFailure is the failed Job's reason: its pod's error, else the Job's.
func (r *EmbeddingServerReconciler) jobFailure(ctx context.Context, job *batchv1.Job) string {
	outcome, err := r.jobOutcome(ctx, job, func(o populateOutcome) bool { return o.failed })
	if err == nil && outcome != nil && outcome.failed {
		return outcome.detail
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return "the Job failed"
}

// jobOutcome reads the populate container of the Job's pods, uncached (the
// cache holds only servers' pods), and returns the newest outcome that
// wanted accepts; nil when none does.
func (r *EmbeddingServerReconciler) jobOutcome(ctx context.Context, job *batchv1.Job, wanted func(populateOutcome) bool) (*populateOutcome, error) {
	var pods corev1.PodList
	if err := r.apiReader.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	for i := range pods.Items {
		if outcome, ok := populateOutcomeOf(&pods.Items[i]); ok && wanted(outcome) {
			return &outcome, nil
		}
	}
	return nil, nil
}

// isJobFinished reports whether the Job has the terminal condition t.
func isJobFinished(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobFinishedAt is when the Job's terminal condition was set, else its
// creation.
func jobFinishedAt(job *batchv1.Job) time.Time {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobComplete) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return job.CreationTimestamp.Time
}

// serversOfPopulateJob maps a populate Job to the servers of its namespace
// that use its binding: those the binding's requestReferences name, the
// server a PerReplica binding is of (its sharing domain: a new server has
// no status.cacheBinding until its children are applied, it waits for this
// Job first, and its reference waits for its claims), and those whose
// status.cacheBinding names it.
func (r *EmbeddingServerReconciler) serversOfPopulateJob(ctx context.Context, job client.Object) []reconcile.Request {
	name := job.GetLabels()[embedopsv1.PopulatesLabel]
	if name == "" {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	binding := &embedopsv1.ModelCacheBinding{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: job.GetNamespace(), Name: name}, binding); err == nil {
		for _, ref := range binding.Status.RequestReferences {
			seen[types.NamespacedName{Namespace: job.GetNamespace(), Name: ref.Name}] = true
		}
		if namespace, server, ok := strings.Cut(binding.Spec.Identity.SharingDomain, "/"); ok && namespace == job.GetNamespace() &&
			binding.Spec.Decision.Mode == embedopsv1.CacheModePerReplica {
			seen[types.NamespacedName{Namespace: namespace, Name: server}] = true
		}
	}
	var servers embedopsv1.EmbeddingServerList
	if err := r.client.List(ctx, &servers, client.InNamespace(job.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the servers of a populate Job", "job", client.ObjectKeyFromObject(job))
	}
	for i := range servers.Items {
		if servers.Items[i].Status.CacheBinding == name {
			seen[client.ObjectKeyFromObject(&servers.Items[i])] = true
		}
	}
	requests := make([]reconcile.Request, 0, len(seen))
	for key := range seen {
		requests = append(requests, reconcile.Request{NamespacedName: key})
	}
	return requests
}
