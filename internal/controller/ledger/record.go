package ledger

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// removeFinalizer drops the cache-protection finalizer of a Released
// binding, with the resourceVersion it was read at.
func (l *Ledger) removeFinalizer(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if !controllerutil.ContainsFinalizer(binding, embedopsv1.CacheProtectionFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(binding.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(binding, embedopsv1.CacheProtectionFinalizer)
	if err := l.client.Patch(ctx, binding, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing the finalizer of binding %s: %w", binding.Name, err))
	}
	l.written.Record(client.ObjectKeyFromObject(binding), binding.ResourceVersion)
	return nil
}

// pruneHistory deletes the oldest Released bindings of the binding's server
// beyond the history limit.
func (l *Ledger) pruneHistory(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	server, ok := binding.Labels[embedopsv1.ServerUIDLabel]
	if !ok {
		return nil
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := l.client.List(ctx, &bindings, client.InNamespace(binding.Namespace), client.MatchingLabels{embedopsv1.ServerUIDLabel: server}); err != nil {
		return fmt.Errorf("listing the bindings of server %s: %w", server, err)
	}
	for _, old := range decision.Prunable(bindings.Items, l.historyLimit) {
		err := l.client.Delete(ctx, &old, client.Preconditions{UID: &old.UID})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("pruning binding %s: %w", old.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("pruned released binding", "binding", old.Name)
		l.events.Eventf(&old, nil, corev1.EventTypeNormal, embedopsv1.PrunedReason, "Prune",
			"deleted this Released record: its server keeps the newest %d", l.historyLimit)
	}
	return nil
}

// reportDrift sets ConfigurationDrift from the StorageClass and the claims,
// with a Warning event when it appears or changes. It never deletes
// anything.
func (l *Ledger) reportDrift(ctx context.Context, binding *embedopsv1.ModelCacheBinding, claims []corev1.PersistentVolumeClaim) error {
	if claim := binding.Spec.Decision.ExistingClaim; claim != "" {
		conditions.MarkFalse(binding, embedopsv1.ConfigurationDriftCondition, embedopsv1.ValidReason,
			"existing claim %s is its user's: no StorageClass or size was decided, so none can drift", claim)
		return nil
	}
	class, err := storageClassOf(ctx, l.client, binding.Spec.Decision.StorageClassName)
	if err != nil {
		return err
	}
	var now *decision.StorageClass
	if class != nil {
		now = &decision.StorageClass{Provisioner: class.Provisioner, Parameters: class.Parameters}
	}
	found := decision.StorageClassDrift(binding, now)
	if found == nil {
		found = decision.ClaimSizeDrift(binding, claims)
	}
	if found == nil {
		conditions.MarkFalse(binding, embedopsv1.ConfigurationDriftCondition, embedopsv1.ValidReason, "the cluster matches the recorded decision")
		return nil
	}
	if !conditions.IsTrue(binding, embedopsv1.ConfigurationDriftCondition) || conditions.GetReason(binding, embedopsv1.ConfigurationDriftCondition) != found.Reason {
		l.events.Eventf(binding, nil, corev1.EventTypeWarning, found.Reason, "Reconcile", "%s", found.Message)
	}
	conditions.MarkTrue(binding, embedopsv1.ConfigurationDriftCondition, found.Reason, "%s", found.Message)
	return nil
}

// dropDanglingReferences removes the references of servers that are gone
// (or were recreated under the same name) or moved to another shard, which
// no server would ever remove, so the binding can go idle and release its
// data. A server the cache does not know is confirmed missing, or in
// another shard, by an uncached read before its reference goes. The
// controller of the binding's shard removes a moved server's reference:
// the server's new shard never writes this binding (see ours).
func (l *Ledger) dropDanglingReferences(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	var gone []embedopsv1.RequestReference
	for _, ref := range binding.Status.RequestReferences {
		if ref.Kind != embedopsv1.EmbeddingServerKind {
			continue
		}
		here, err := l.serverInShard(ctx, binding, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, ref.UID)
		if err != nil {
			return err
		}
		if !here {
			gone = append(gone, ref)
		}
	}
	for _, ref := range gone {
		decision.RemoveReference(binding, ref.UID, l.now())
		ctrl.LoggerFrom(ctx).Info("dropped the reference of a server that is gone or in another shard", "binding", binding.Name,
			"server", ref.Namespace+"/"+ref.Name, "uid", ref.UID)
	}
	return nil
}

// serverInShard reports whether the server with uid exists in the
// binding's shard (decision.SameShard), from the cache and, when the cache
// says no, from the API server.
func (l *Ledger) serverInShard(ctx context.Context, binding *embedopsv1.ModelCacheBinding, key client.ObjectKey, uid types.UID) (bool, error) {
	server := &embedopsv1.EmbeddingServer{}
	if err := l.client.Get(ctx, key, server); err == nil && server.UID == uid && decision.SameShard(binding.Labels, server.Labels, l.shardKeys) {
		return true, nil
	}
	err := l.apiReader.Get(ctx, key, server)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading server %s: %w", key, err)
	default:
		return server.UID == uid && decision.SameShard(binding.Labels, server.Labels, l.shardKeys), nil
	}
}
