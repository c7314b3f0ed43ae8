package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/controller/writes"
)

// A reconcile never builds its status patch on a copy of the server the
// cache has not caught up with: the status patch (fluxcd/pkg/runtime/patch,
// Helper.Patch) sends only what changed from the copy read at the start of
// the reconcile. When that copy is stale and already shows the values
// computed now, it sends nothing and the API server keeps what was written
// since: a server Ready in its conditions and Pending in its phase, with no
// event left to reconcile it again. controller-runtime's experimental
// read-your-writes client waits for every write, but a read then waits on
// informers that may never see the object written (CacheOptions filters
// most kinds by label), so only the server's own object gets it here, from
// writes.Versions.

// recordingWriter is the client the status patcher writes a server through:
// each successful patch records the resourceVersion the API server returned,
// and a read of the server the cache is behind on goes to the API server.
type recordingWriter struct {
	client.Client
	apiReader client.Reader
	writes    *writes.Versions
}

// Get reads the server from the cache, or from the API server when the cache
// is behind the last write. The patcher reads the latest server to patch its
// conditions with an optimistic lock; a stale copy would fail each of its
// retries with a Conflict while the cache catches up, as it does for seconds
// after a kube-apiserver restart, and every failed reconcile doubles the
// server's retry delay.
func (c recordingWriter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if c.writes.Behind(key, obj.GetResourceVersion()) {
		return c.apiReader.Get(ctx, key, obj, opts...)
	}
	return nil
}

// Patch patches obj and records its new resourceVersion.
func (c recordingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	c.writes.Record(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
	return nil
}

// Status returns the status writer, recording too.
func (c recordingWriter) Status() client.SubResourceWriter {
	return recordingStatusWriter{SubResourceWriter: c.Client.Status(), writes: c.writes}
}

// recordingStatusWriter records the resourceVersion of each status patch.
type recordingStatusWriter struct {
	client.SubResourceWriter
	writes *writes.Versions
}

// Patch patches obj's status and records its new resourceVersion.
func (c recordingStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := c.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	c.writes.Record(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
	return nil
}
