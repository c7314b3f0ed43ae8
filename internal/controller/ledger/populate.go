package ledger

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

// ReportPopulate sets a Shared binding's ModelReady condition to its
// populate Job's state (Downloading, or DownloadFailed with the pod's
// error; ModelNotInClaim when the Job verified an existing claim), so `kubectl get modelcachebinding -o yaml` tells why the cache
// holds no model without looking for the servers that wait on it. The
// binding is written only when the condition changes; a new failure is
// also a Warning event on the binding.
func (l *Ledger) ReportPopulate(ctx context.Context, binding *embedopsv1.ModelCacheBinding, reason, message string) error {
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		before := conditions.Get(binding, embedopsv1.ModelReadyCondition)
		if before != nil && before.Status == metav1.ConditionFalse && before.Reason == reason && before.Message == message {
			return nil
		}
		conditions.MarkFalse(binding, embedopsv1.ModelReadyCondition, reason, "%s", message)
		err := l.updateStatus(ctx, binding)
		if apierrors.IsConflict(err) {
			// Every server on the binding reports the same Job: the
			// one that lost the race re-reads and finds it said.
			return l.reread(ctx, binding, err)
		}
		wrote = err == nil
		return err
	})
	if err != nil {
		return fmt.Errorf("reporting the populate Job: %w", err)
	}
	if wrote && (reason == embedopsv1.DownloadFailedReason || reason == embedopsv1.ModelNotInClaimReason) {
		l.events.Eventf(binding, nil, corev1.EventTypeWarning, reason, "Populate", "%s", message)
	}
	return nil
}

// reread replaces binding with the API server's copy after the conflict
// err, and returns err so the caller's retry runs again.
func (l *Ledger) reread(ctx context.Context, binding *embedopsv1.ModelCacheBinding, err error) error {
	fresh := &embedopsv1.ModelCacheBinding{}
	if getErr := l.apiReader.Get(ctx, client.ObjectKeyFromObject(binding), fresh); getErr != nil {
		return getErr
	}
	*binding = *fresh
	return err
}

// markPopulated sets a Shared binding's ModelReady to the commit its Job
// put into the claim. A PerReplica binding's Job only resolved the commit:
// its report ends, and the replicas' pods report on their server.
func markPopulated(binding *embedopsv1.ModelCacheBinding, realized *embedopsv1.RealizedCache) {
	if realized.ResolvedCommit == "" {
		return
	}
	if binding.Spec.Decision.Mode != embedopsv1.CacheModeShared {
		conditions.Delete(binding, embedopsv1.ModelReadyCondition)
		return
	}
	if claim := binding.Spec.Decision.ExistingClaim; claim != "" {
		conditions.MarkTrue(binding, embedopsv1.ModelReadyCondition, embedopsv1.DownloadedReason,
			"model commit %s is in the existing claim %s", realized.ResolvedCommit, claim)
		return
	}
	conditions.MarkTrue(binding, embedopsv1.ModelReadyCondition, embedopsv1.DownloadedReason,
		"model commit %s is in the shared cache", realized.ResolvedCommit)
}

// stopPopulating deletes a Retiring binding's populate Job, read from the
// cache by its name and controller reference, with its pods: a finished
// Job's pod still names the Shared claim, and pvc-protection keeps a claim
// any scheduled pod names (claimUsers), so the Job, kept until the binding
// record goes, would hold the claim's deletion for good.
func (l *Ledger) stopPopulating(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	job := &batchv1.Job{}
	err := l.client.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: builder.PopulateJobName(binding.Name)}, job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the populate Job: %w", err)
	}
	if !metav1.IsControlledBy(job, binding) || !job.DeletionTimestamp.IsZero() {
		return nil
	}
	err = l.client.Delete(ctx, job, client.Preconditions{UID: &job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the populate Job %s: %w", job.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted the populate Job of a retiring binding", "binding", binding.Name, "job", job.Name)
	return nil
}
