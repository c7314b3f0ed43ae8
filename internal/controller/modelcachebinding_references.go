package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// dropDanglingReferences removes the references of servers that are gone
// (or were recreated under the same name), which no server would ever
// remove, so the binding can go idle and release its data. A server the
// cache does not know is confirmed missing by an uncached read before its
// reference goes.
func (r *ModelCacheBindingReconciler) dropDanglingReferences(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	var gone []embedopsv1.RequestReference
	for _, ref := range binding.Status.RequestReferences {
		if ref.Kind != embedopsv1.EmbeddingServerKind {
			continue
		}
		exists, err := r.serverExists(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, ref.UID)
		if err != nil {
			return err
		}
		if !exists {
			gone = append(gone, ref)
		}
	}
	for _, ref := range gone {
		removeReference(binding, ref.UID, r.now())
		ctrl.LoggerFrom(ctx).Info("dropped the reference of a server that is gone", "binding", binding.Name,
			"server", ref.Namespace+"/"+ref.Name, "uid", ref.UID)
	}
	return nil
}

// serverExists reports whether the server with uid exists, from the cache
// and, when the cache says no, from the API server.
func (r *ModelCacheBindingReconciler) serverExists(ctx context.Context, key types.NamespacedName, uid types.UID) (bool, error) {
	server := &embedopsv1.EmbeddingServer{}
	if err := r.client.Get(ctx, key, server); err == nil && server.UID == uid {
		return true, nil
	}
	err := r.apiReader.Get(ctx, key, server)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading server %s: %w", key, err)
	default:
		return server.UID == uid, nil
	}
}

// statefulSetMakingClaims names a StatefulSet whose claim templates would
// create one of the binding's claims: a server deleted during its first
// reconcile may leave one for a moment, and the StatefulSet controller could
// create a claim after the binding released the others. Read uncached, so a
// deletion is seen as it is; empty when there is none.
func (r *ModelCacheBindingReconciler) statefulSetMakingClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (string, error) {
	var statefulSets appsv1.StatefulSetList
	if err := r.apiReader.List(ctx, &statefulSets, client.InNamespace(binding.Namespace),
		client.MatchingLabelsSelector{Selector: ownedSelector()}); err != nil {
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
