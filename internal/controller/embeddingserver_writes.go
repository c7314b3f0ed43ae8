package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// serverWrites remembers, per server, the resourceVersion of the last write
// this process made to it, so that a reconcile never builds its status patch
// on a copy the cache has not caught up with.
//
// The status patch (fluxcd/pkg/runtime/patch, Helper.Patch) sends only what
// changed from the copy read at the start of the reconcile. When that copy is
// stale and already shows the values computed now, it sends nothing and the
// API server keeps what was written since: a server Ready in its conditions
// and Pending in its phase, with no event left to reconcile it again.
// resourceVersions of one resource compare as integers
// (k8s.io/apimachinery/pkg/util/resourceversion). controller-runtime's
// experimental read-your-writes client waits for every write, but a read
// then waits on informers that may never see the object written (CacheOptions
// filters most kinds by label), so only the server's own object gets it here.
// It is safe for concurrent use.
type serverWrites struct {
	versions sync.Map // types.NamespacedName -> string
}

// record remembers a write of the server at resourceVersion rv.
func (w *serverWrites) record(key types.NamespacedName, rv string) {
	if rv == "" {
		return
	}
	if last, ok := w.versions.Load(key); ok {
		if c, err := resourceversion.CompareResourceVersion(rv, last.(string)); err == nil && c <= 0 {
			return
		}
	}
	w.versions.Store(key, rv)
}

// forget drops what is remembered of a server that is gone.
func (w *serverWrites) forget(key types.NamespacedName) {
	w.versions.Delete(key)
}

// behind reports whether a copy of the server at resourceVersion rv is older
// than the last write; a resourceVersion that does not compare counts as
// behind, so the caller reads the server from the API server.
func (w *serverWrites) behind(key types.NamespacedName, rv string) bool {
	last, ok := w.versions.Load(key)
	if !ok {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(rv, last.(string))
	return err != nil || c < 0
}

// recordingWriter is the client the status patcher writes a server through:
// each successful patch records the resourceVersion the API server returned,
// and a read of the server the cache is behind on goes to the API server.
type recordingWriter struct {
	client.Client
	apiReader client.Reader
	writes    *serverWrites
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
	if c.writes.behind(key, obj.GetResourceVersion()) {
		return c.apiReader.Get(ctx, key, obj, opts...)
	}
	return nil
}

// Patch patches obj and records its new resourceVersion.
func (c recordingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	c.writes.record(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
	return nil
}

// Status returns the status writer, recording too.
func (c recordingWriter) Status() client.SubResourceWriter {
	return recordingStatusWriter{SubResourceWriter: c.Client.Status(), writes: c.writes}
}

// recordingStatusWriter records the resourceVersion of each status patch.
type recordingStatusWriter struct {
	client.SubResourceWriter
	writes *serverWrites
}

// Patch patches obj's status and records its new resourceVersion.
func (c recordingStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := c.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	c.writes.record(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
	return nil
}
