package act

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fluxcd/pkg/runtime/patch"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// ServerPatcher writes what one reconcile changed in its server: the status
// in one merge patch, conditions and the rest together, then the metadata
// (the finalizer) when it changed.
//
// fluxcd/pkg/runtime/patch's Helper writes a status in two patches: the
// conditions first, merged into the latest copy it reads with the
// resourceVersion as precondition (so controllers that share an object's
// conditions do not overwrite each other's), then the rest of the status as
// an unconditional merge patch. The reconcile's copy of the server is never
// older than this process's last write of it (RecordingWriter), so the
// status patch is sent as a diff from that copy with its resourceVersion as
// precondition: it succeeds only when nobody wrote the server since, when
// it is exactly the Helper's two patches in one request. On a Conflict
// (someone else wrote the server since the reconcile read it: a spec edit,
// a reconcile request) the write falls back to the Helper
// (patch.SerialPatcher), which merges the owned conditions into the latest
// copy.
type ServerPatcher struct {
	before *embedopsv1.EmbeddingServer
	client client.Client
	serial *patch.SerialPatcher
	// live reads the server uncached when a finalizer's entry moved; nil
	// means the removal is not tried again.
	live client.Reader
	// owned are the condition types the reconciler owns: after a
	// Conflict, they are merged into the latest copy.
	owned []string
}

// NewServerPatcher remembers server as the reconcile read it. c writes it
// (a RecordingWriter in the reconciler); live reads it again when a
// finalizer's entry moved, nil for never; owned are the condition types
// the reconciler writes.
func NewServerPatcher(server *embedopsv1.EmbeddingServer, c client.Client, live client.Reader, owned []string) *ServerPatcher {
	return &ServerPatcher{before: server.DeepCopy(), client: c, serial: patch.NewSerialPatcher(server, c), live: live, owned: owned}
}

// PatchOptions are how a reconcile's outcome is written.
type PatchOptions struct {
	// ObservedGeneration sets status.observedGeneration to the generation
	// the reconcile read.
	ObservedGeneration bool
}

// Patch writes server's changes from the copy the reconcile read: the
// status in one locked merge patch, or through the serial patcher after a
// Conflict; then the metadata. The owned conditions and the field manager
// are those of both ways.
func (p *ServerPatcher) Patch(ctx context.Context, server *embedopsv1.EmbeddingServer, opts PatchOptions) error {
	if opts.ObservedGeneration {
		server.Status.ObservedGeneration = server.Generation
	}
	// Finalizers this reconcile removed go by a patch of their own entry
	// (removeFinalizers); the other patches keep them in the list.
	removed := notIn(p.before.Finalizers, server.Finalizers)
	kept := server.DeepCopy()
	kept.Finalizers = append(slices.Clone(p.before.Finalizers), notIn(server.Finalizers, p.before.Finalizers)...)
	err := p.patchStatus(ctx, kept)
	if apierrors.IsConflict(err) {
		fluxOptions := []patch.Option{patch.WithOwnedConditions{Conditions: p.owned}, patch.WithFieldOwner(embedopsv1.StatusFieldManager)}
		if opts.ObservedGeneration {
			fluxOptions = append(fluxOptions, patch.WithStatusObservedGeneration{})
		}
		err = p.serial.Patch(ctx, kept, fluxOptions...)
	} else if err == nil {
		err = p.patchMetadata(ctx, kept)
	}
	if err != nil {
		return err
	}
	return p.removeFinalizers(ctx, server, removed)
}

// AddFinalizer writes a new finalizer at once, as a merge patch with the
// read copy's resourceVersion as precondition (the patch replaces the whole
// list, so a finalizer someone added since must not be lost), and makes the
// API server's answer the copy the status patch starts from. The answer is
// the server as stored now, as live as an uncached read. The status the
// reconcile set so far stays on server: the status patch writes it.
func (p *ServerPatcher) AddFinalizer(ctx context.Context, server *embedopsv1.EmbeddingServer, finalizer string) error {
	base := server.DeepCopy()
	controllerutil.AddFinalizer(server, finalizer)
	err := p.client.Patch(ctx, server, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(embedopsv1.StatusFieldManager))
	if err != nil {
		base.DeepCopyInto(server)
		return fmt.Errorf("adding the finalizer: %w", err)
	}
	p.before = server.DeepCopy()
	p.serial = patch.NewSerialPatcher(server, p.client)
	base.Status.DeepCopyInto(&server.Status)
	return nil
}

// patchStatus sends the status diff with the read copy's resourceVersion as
// precondition; nothing when the status did not change.
func (p *ServerPatcher) patchStatus(ctx context.Context, server *embedopsv1.EmbeddingServer) error {
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

// patchMetadata sends the metadata diff as an unconditional merge patch,
// as the Helper does; nothing when it did not change. Finalizers are not
// in it (removeFinalizers).
func (p *ServerPatcher) patchMetadata(ctx context.Context, server *embedopsv1.EmbeddingServer) error {
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

// removeFinalizers removes each finalizer from the server by a JSON patch
// of its one entry, tested first: a merge patch writes the whole list, so
// from a copy read before someone else changed it, it would drop a
// finalizer another controller added since, or put back the
// foregroundDeletion that the garbage collector removed, which the API
// server refuses on an object being deleted ("no new finalizers can be
// added if the object is being deleted", k8s.io/apimachinery v0.37.2
// pkg/api/validation/objectmeta.go). A failed test (the entry moved) reads the
// server again uncached and tries once more; a server already gone is done.
func (p *ServerPatcher) removeFinalizers(ctx context.Context, server *embedopsv1.EmbeddingServer, finalizers []string) error {
	for _, finalizer := range finalizers {
		err := p.removeFinalizer(ctx, server.Namespace, server.Name, p.before.Finalizers, finalizer)
		if apierrors.IsInvalid(err) && p.live != nil {
			live := &embedopsv1.EmbeddingServer{}
			if err = p.live.Get(ctx, client.ObjectKeyFromObject(server), live); err == nil {
				err = p.removeFinalizer(ctx, server.Namespace, server.Name, live.Finalizers, finalizer)
			}
		}
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing the finalizer %s: %w", finalizer, err)
		}
	}
	return nil
}

// removeFinalizer removes finalizer at its index in list, which the server
// must still hold there; nothing when list does not hold it.
func (p *ServerPatcher) removeFinalizer(ctx context.Context, namespace, name string, list []string, finalizer string) error {
	index := slices.Index(list, finalizer)
	if index < 0 {
		return nil
	}
	entry := fmt.Sprintf("/metadata/finalizers/%d", index)
	ops, err := json.Marshal([]map[string]any{{"op": "test", "path": entry, "value": finalizer}, {"op": "remove", "path": entry}})
	if err != nil {
		return err
	}
	target := &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return p.client.Patch(ctx, target, client.RawPatch(types.JSONPatchType, ops), client.FieldOwner(embedopsv1.StatusFieldManager))
}

// notIn are the entries of list that others lacks, in list's order.
func notIn(list, others []string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(entry string) bool { return slices.Contains(others, entry) })
}
