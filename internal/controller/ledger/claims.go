package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// ensureClaims creates the missing claims of a Shared binding that is not
// being deleted and returns the binding's claims that exist. PerReplica
// claims are the StatefulSet's to create.
func (l *Ledger) ensureClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) ([]corev1.PersistentVolumeClaim, error) {
	claims, err := l.existingClaims(ctx, binding)
	if err != nil || binding.Spec.Decision.Mode != embedopsv1.CacheModeShared || !binding.DeletionTimestamp.IsZero() {
		return claims, err
	}
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		if slices.ContainsFunc(claims, func(c corev1.PersistentVolumeClaim) bool { return c.Name == name }) {
			continue
		}
		if err := l.client.Create(ctx, builder.SharedClaim(binding, name), client.FieldOwner(embedopsv1.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating claim %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("created cache claim", "binding", binding.Name, "claim", name)
	}
	return claims, nil
}

// existingClaims returns the binding's claims that exist, from the cache.
func (l *Ledger) existingClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) ([]corev1.PersistentVolumeClaim, error) {
	var claims []corev1.PersistentVolumeClaim
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		claim := &corev1.PersistentVolumeClaim{}
		err := l.client.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: name}, claim)
		switch {
		case err == nil:
			claims = append(claims, *claim)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading claim %s: %w", name, err)
		}
	}
	return claims, nil
}

// releaseClaims deletes the binding's claims that still exist, are the
// binding's and no pod names (claimUsers), and returns how many of those
// remain and what their deletion waits for. Claims are read from the API server,
// not the cache, so the preconditions name the claim as it is. A claim that
// is not the binding's is reported and left alone.
func (l *Ledger) releaseClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (int, []string, error) {
	remaining := 0
	var waits []string
	users := &claimUsers{reader: l.apiReader, namespace: binding.Namespace}
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		claim := &corev1.PersistentVolumeClaim{}
		err := l.apiReader.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: name}, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("reading claim %s: %w", name, err)
		}
		if why := decision.ClaimOwnership(binding, claim); why != "" {
			ctrl.LoggerFrom(ctx).Info("leaving a claim that is not the binding's", "binding", binding.Name, "claim", name, "why", why)
			l.events.Eventf(binding, nil, corev1.EventTypeWarning, embedopsv1.ClaimNotOwnedReason, "Release",
				"left claim %s alone: %s", name, why)
			continue
		}
		remaining++
		if !claim.DeletionTimestamp.IsZero() {
			continue
		}
		pod, err := users.of(ctx, name)
		if err != nil {
			return 0, nil, err
		}
		if pod != "" {
			waits = append(waits, fmt.Sprintf("claim %s is deleted once pod %s is gone", name, pod))
			continue
		}
		if err := l.deleteClaim(ctx, binding, claim); err != nil {
			return 0, nil, err
		}
	}
	return remaining, waits, nil
}

// deleteClaim deletes a claim as it was read (UID and resourceVersion
// preconditions) and reports it; a claim gone or changed since is looked at
// again next time.
func (l *Ledger) deleteClaim(ctx context.Context, binding *embedopsv1.ModelCacheBinding, claim *corev1.PersistentVolumeClaim) error {
	preconditions := client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion}
	err := l.client.Delete(ctx, claim, preconditions)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting claim %s: %w", claim.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted cache claim", "binding", binding.Name, "claim", claim.Name)
	l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.ClaimDeletedReason, "Release",
		"deleted cache claim %s (volume %s)", claim.Name, claim.Spec.VolumeName)
	return nil
}

// statefulSetMakingClaims names a StatefulSet whose claim templates would
// create one of the binding's claims: a server deleted during its first
// reconcile may leave one for a moment, and the StatefulSet controller could
// create a claim after the binding released the others. Read uncached, so a
// deletion is seen as it is; empty when there is none.
func (l *Ledger) statefulSetMakingClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (string, error) {
	var statefulSets appsv1.StatefulSetList
	if err := l.apiReader.List(ctx, &statefulSets, client.InNamespace(binding.Namespace),
		client.HasLabels{embedopsv1.NameLabel}); err != nil {
		return "", fmt.Errorf("listing StatefulSets: %w", err)
	}
	for _, sts := range statefulSets.Items {
		for _, template := range sts.Spec.VolumeClaimTemplates {
			prefix := template.Name + "-" + sts.Name + "-"
			if slices.ContainsFunc(binding.Spec.Resources.PersistentVolumeClaimNames, func(claim string) bool {
				return strings.HasPrefix(claim, prefix)
			}) {
				return sts.Name, nil
			}
		}
	}
	return "", nil
}
