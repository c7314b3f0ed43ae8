package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

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
