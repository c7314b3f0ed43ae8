package controller

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/patch"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// serverPatcher writes what one reconcile changed in its server: the status
// in one merge patch, conditions and the rest together, then the metadata
// (the finalizer) when it changed.
//
// fluxcd/pkg/runtime/patch's Helper writes a status in two patches: the
// conditions first, merged into the latest copy it reads with the
// resourceVersion as precondition (so controllers that share an object's
// conditions do not overwrite each other's), then the rest of the status as
// an unconditional merge patch. The reconcile's copy of the server is never
// older than this process's last write of it (recordingWriter), so the
// status patch is sent as a diff from that copy with its resourceVersion as
// precondition: it succeeds only when nobody wrote the server since, when
// it is exactly the Helper's two patches in one request. On a Conflict
// (someone else wrote the server since the reconcile read it: a spec edit,
// a reconcile request) the write falls back to the Helper
// (patch.SerialPatcher), which merges the owned conditions into the latest
// copy.
type serverPatcher struct {
	before *embedopsv1.EmbeddingServer
	client client.Client
	serial *patch.SerialPatcher
}

// newServerPatcher remembers server as the reconcile read it.
func newServerPatcher(server *embedopsv1.EmbeddingServer, c client.Client) *serverPatcher {
	return &serverPatcher{before: server.DeepCopy(), client: c, serial: patch.NewSerialPatcher(server, c)}
}

// patchOptions are how a reconcile's outcome is written.
type patchOptions struct {
	// observedGeneration sets status.observedGeneration to the generation
	// the reconcile read.
	observedGeneration bool
}

// Patch writes server's changes from the copy the reconcile read: the
// status in one locked merge patch, or through the serial patcher after a
// Conflict; then the metadata. The owned conditions and the field manager
// are those of both ways.
func (p *serverPatcher) Patch(ctx context.Context, server *embedopsv1.EmbeddingServer, opts patchOptions) error {
	if opts.observedGeneration {
		server.Status.ObservedGeneration = server.Generation
	}
	err := p.patchStatus(ctx, server)
	if apierrors.IsConflict(err) {
		fluxOptions := []patch.Option{patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(embedopsv1.StatusFieldManager)}
		if opts.observedGeneration {
			fluxOptions = append(fluxOptions, patch.WithStatusObservedGeneration{})
		}
		return p.serial.Patch(ctx, server, fluxOptions...)
	}
	if err != nil {
		return err
	}
	return p.patchMetadata(ctx, server)
}

// AddFinalizer writes a new finalizer at once, as a merge patch with the
// read copy's resourceVersion as precondition (the patch replaces the whole
// list, so a finalizer someone added since must not be lost), and makes the
// API server's answer the copy the status patch starts from. The answer is
// the server as stored now, as live as an uncached read.
func (p *serverPatcher) AddFinalizer(ctx context.Context, server *embedopsv1.EmbeddingServer, finalizer string) error {
	base := server.DeepCopy()
	controllerutil.AddFinalizer(server, finalizer)
	err := p.client.Patch(ctx, server, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(embedopsv1.StatusFieldManager))
	if err != nil {
		base.DeepCopyInto(server)
		return fmt.Errorf("adding the finalizer: %w", err)
	}
	p.before = server.DeepCopy()
	p.serial = patch.NewSerialPatcher(server, p.client)
	return nil
}

// patchStatus sends the status diff with the read copy's resourceVersion as
// precondition; nothing when the status did not change.
func (p *serverPatcher) patchStatus(ctx context.Context, server *embedopsv1.EmbeddingServer) error {
	if equality.Semantic.DeepEqual(p.before.Status, server.Status) {
		return nil
	}
	// Both sides carry the read metadata, so the patch holds the status
	// and the precondition only.
	after := p.before.DeepCopy()
	server.Status.DeepCopyInto(&after.Status)
	base := client.MergeFromWithOptions(p.before.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := p.client.Status().Patch(ctx, after, base, client.FieldOwner(embedopsv1.StatusFieldManager)); err != nil {
		return fmt.Errorf("patching the status: %w", err)
	}
	return nil
}

// patchMetadata sends the metadata diff (finalizers) as an unconditional
// merge patch, as the Helper does; nothing when it did not change.
func (p *serverPatcher) patchMetadata(ctx context.Context, server *embedopsv1.EmbeddingServer) error {
	if equality.Semantic.DeepEqual(p.before.ObjectMeta, server.ObjectMeta) {
		return nil
	}
	after := p.before.DeepCopy()
	server.ObjectMeta.DeepCopyInto(&after.ObjectMeta)
	after.ResourceVersion = p.before.ResourceVersion
	if err := p.client.Patch(ctx, after, client.MergeFrom(p.before.DeepCopy()), client.FieldOwner(embedopsv1.StatusFieldManager)); err != nil {
		return fmt.Errorf("patching the metadata: %w", err)
	}
	return nil
}
