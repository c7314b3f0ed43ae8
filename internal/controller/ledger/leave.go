package ledger

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// Leave removes the server's reference from every binding of its namespace
// but keep ("" for all). Bindings are listed from the API server, so a
// reference added moments ago is not missed. The last reference leaving
// starts the binding's idle window.
func (l *Ledger) Leave(ctx context.Context, server *embedopsv1.EmbeddingServer, keep string) error {
	var bindings embedopsv1.ModelCacheBindingList
	if err := l.apiReader.List(ctx, &bindings, client.InNamespace(server.Namespace)); err != nil {
		return fmt.Errorf("listing bindings: %w", err)
	}
	for i := range bindings.Items {
		binding := &bindings.Items[i]
		if binding.Name == keep || !decision.HasReference(binding, server.UID) {
			continue
		}
		decision.RemoveReference(binding, server.UID, l.now())
		if err := l.updateStatus(ctx, binding); err != nil {
			return fmt.Errorf("removing the reference: %w", err)
		}
		l.left.Store(leftKey{binding: binding.UID, server: server.UID}, struct{}{})
		ctrl.LoggerFrom(ctx).Info("left binding", "binding", binding.Name)
	}
	return nil
}

// RecordRealized fills the binding's unset realized fields from found
// (decision.MergeRealized), with the resourceVersion it was read at; the
// fields are immutable once set. It returns the commit the binding records.
func (l *Ledger) RecordRealized(ctx context.Context, binding *embedopsv1.ModelCacheBinding, found *embedopsv1.RealizedCache) (string, error) {
	realized := decision.MergeRealized(binding.Status.Realized, found)
	binding.Status.Realized = realized
	if err := l.updateStatus(ctx, binding); err != nil {
		return "", fmt.Errorf("recording the realized cache: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("recorded the realized cache", "binding", binding.Name,
		"resolvedCommit", realized.ResolvedCommit, "contentDigest", realized.ContentDigest)
	return realized.ResolvedCommit, nil
}
