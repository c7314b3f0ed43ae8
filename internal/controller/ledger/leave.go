package ledger

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// Leave removes the server's reference from every binding of its namespace
// but keep ("" for all) and those whose storage (decision.StorageName) is
// among inUse: storage the server's old pods still mount while a storage
// change rolls. See referencing for where the bindings are read. A binding
// the server created and never referenced is left too (abandonAwaiting).
// The last reference leaving starts the binding's idle window. A binding
// handing its storage to a successor that holds it is superseded instead
// (see supersede): it never goes idle, so it never deletes that storage.
func (l *Ledger) Leave(ctx context.Context, server *embedopsv1.EmbeddingServer, keep string, inUse ...string) error {
	if err := l.abandonAwaiting(ctx, server, keep, inUse); err != nil {
		return err
	}
	bindings, err := l.referencing(ctx, server, keep)
	if err != nil {
		return err
	}
	for _, binding := range bindings {
		if slices.Contains(inUse, decision.StorageName(binding)) {
			continue
		}
		if err := l.leave(ctx, server, binding); err != nil {
			return err
		}
		l.left.Store(leftKey{binding: binding.UID, server: server.UID}, struct{}{})
		l.held.drop(server.UID, binding.Name)
	}
	return nil
}

// leave removes the server's reference from one binding, superseding it
// when it hands its storage to a holder and the server is its only user.
func (l *Ledger) leave(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) error {
	if decision.HandingOver(binding) && decision.Supersedable(binding, server.UID) {
		holder, err := l.holderOf(ctx, binding)
		if err != nil {
			return err
		}
		if holder != nil {
			return l.supersede(ctx, binding, holder)
		}
	}
	decision.RemoveReference(binding, server.UID, l.now())
	if err := l.updateStatus(ctx, binding); err != nil {
		return fmt.Errorf("removing the reference: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("left binding", "binding", binding.Name)
	return nil
}

// ForgetServer drops what the ledger remembers of a server whose deletion
// left every binding.
func (l *Ledger) ForgetServer(server *embedopsv1.EmbeddingServer) {
	l.held.forget(server.UID)
}

// ForgetBinding drops what the ledger remembers of a binding that is gone.
func (l *Ledger) ForgetBinding(key types.NamespacedName) {
	l.written.Forget(key)
}

// referencing returns, as read for an update, the bindings of the server's
// namespace but keep that hold its reference. The cache is trusted, through
// ReferenceIndex, except where it may be behind what this process knows:
// a binding this process wrote or read later than the cached copy, or
// referenced for this server without the cache showing it, is read from
// the API server (learnNamespace covers the references of a previous
// leader). A steady reconcile therefore reads nothing from the API server,
// however many bindings and Released records the namespace holds.
func (l *Ledger) referencing(ctx context.Context, server *embedopsv1.EmbeddingServer, keep string) ([]*embedopsv1.ModelCacheBinding, error) {
	if err := l.learnNamespace(ctx, server.Namespace); err != nil {
		return nil, err
	}
	var cached embedopsv1.ModelCacheBindingList
	if err := l.client.List(ctx, &cached, client.InNamespace(server.Namespace), client.MatchingFields{ReferenceIndex: string(server.UID)}); err != nil {
		return nil, fmt.Errorf("listing bindings from the cache: %w", err)
	}
	names := l.held.names(server.UID)
	for i := range cached.Items {
		names = append(names, cached.Items[i].Name)
	}
	slices.Sort(names)
	var found []*embedopsv1.ModelCacheBinding
	for _, name := range slices.Compact(names) {
		if name == keep {
			continue
		}
		binding, err := l.latest(ctx, types.NamespacedName{Namespace: server.Namespace, Name: name})
		if err != nil {
			return nil, err
		}
		if binding == nil || !decision.HasReference(binding, server.UID) {
			l.held.drop(server.UID, name)
			continue
		}
		found = append(found, binding)
	}
	return found, nil
}

// learnNamespace lists the namespace's bindings from the API server the
// first time this process leaves a binding there, and remembers every
// reference they hold and the version it was read at, as if this process
// had written them: a previous leader's last references may not be in the
// cache yet. After that only this process writes references.
func (l *Ledger) learnNamespace(ctx context.Context, namespace string) error {
	if _, listed := l.listed.Load(namespace); listed {
		return nil
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := l.apiReader.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing bindings: %w", err)
	}
	for i := range bindings.Items {
		binding := &bindings.Items[i]
		if !l.ours(binding) {
			continue // another shard's references are its own to remove
		}
		for _, ref := range binding.Status.RequestReferences {
			l.held.add(ref.UID, binding.Name)
		}
		if len(binding.Status.RequestReferences) > 0 {
			l.written.Record(client.ObjectKeyFromObject(binding), binding.ResourceVersion)
		}
	}
	l.listed.Store(namespace, struct{}{})
	return nil
}

// latest reads a binding from the cache, or from the API server when the
// cache does not hold it or is behind this process's last write of it;
// nil when it is gone or is another shard's.
func (l *Ledger) latest(ctx context.Context, key types.NamespacedName) (*embedopsv1.ModelCacheBinding, error) {
	binding := &embedopsv1.ModelCacheBinding{}
	err := l.client.Get(ctx, key, binding)
	switch {
	case err == nil && !l.written.Behind(key, binding.ResourceVersion):
		return binding, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading binding %s: %w", key.Name, err)
	}
	return l.read(ctx, key)
}

// RecordRealized fills the binding's unset realized fields from found
// (decision.MergeRealized), with the resourceVersion it was read at; the
// fields are immutable once set. It returns the commit the binding records.
func (l *Ledger) RecordRealized(ctx context.Context, binding *embedopsv1.ModelCacheBinding, found *embedopsv1.RealizedCache) (string, error) {
	realized := decision.MergeRealized(binding.Status.Realized, found)
	binding.Status.Realized = realized
	markPopulated(binding, realized)
	if err := l.updateStatus(ctx, binding); err != nil {
		return "", fmt.Errorf("recording the realized cache: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("recorded the realized cache", "binding", binding.Name,
		"resolvedCommit", realized.ResolvedCommit, "contentDigest", realized.ContentDigest)
	return realized.ResolvedCommit, nil
}

// RecordClaimFills adds how claims were filled to the binding's
// status.claimFills (decision.MergeFills); nothing when it records them.
func (l *Ledger) RecordClaimFills(ctx context.Context, binding *embedopsv1.ModelCacheBinding, fills []embedopsv1.ClaimFill) error {
	merged, changed := decision.MergeFills(binding.Status.ClaimFills, fills)
	if !changed {
		return nil
	}
	binding.Status.ClaimFills = merged
	if err := l.updateStatus(ctx, binding); err != nil {
		return fmt.Errorf("recording how claims were filled: %w", err)
	}
	return nil
}
