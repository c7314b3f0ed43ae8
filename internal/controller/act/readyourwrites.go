package act

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
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
// informers that may never see the object written (watch.CacheOptions filters
// most kinds by label), so only the server's own object gets it here, from
// writes.Versions.

// RecordingWriter is the client the status patcher writes a server through:
// each successful patch records the resourceVersion the API server returned,
// and a read of the server the cache is behind on goes to the API server.
type RecordingWriter struct {
	client.Client
	apiReader client.Reader
	writes    *writes.Versions
	// answers holds the API server's answer to the last write of each
	// server until the cache shows that write (ForgetCaughtUp, from the
	// informer): a reconcile starting meanwhile reads it instead of the API
	// server (the answer is the server as that write left it, which is
	// what an uncached read would show unless someone wrote since, and then
	// the locked status patch conflicts and falls back as it would from a
	// cached copy).
	answers *sync.Map // client.ObjectKey -> *embedopsv1.EmbeddingServer
}

// NewRecordingWriter writes through c and records in versions; it reads
// from c unless c is behind versions, then from apiReader, or from the
// last write's answer when keepAnswers.
func NewRecordingWriter(c client.Client, apiReader client.Reader, versions *writes.Versions, keepAnswers bool) RecordingWriter {
	writer := RecordingWriter{Client: c, apiReader: apiReader, writes: versions}
	if keepAnswers {
		writer.answers = &sync.Map{}
	}
	return writer
}

// Get reads the server from the cache, or from the API server when the cache
// is behind the last write. The patcher reads the latest server to patch its
// conditions with an optimistic lock; a stale copy would fail each of its
// retries with a Conflict while the cache catches up, as it does for seconds
// after a kube-apiserver restart, and every failed reconcile doubles the
// server's retry delay.
func (c RecordingWriter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if !c.writes.Behind(key, obj.GetResourceVersion()) {
		return nil
	}
	if server, ok := obj.(*embedopsv1.EmbeddingServer); ok && c.answers != nil {
		if answer, ok := c.answers.Load(key); ok && !c.writes.Behind(key, answer.(*embedopsv1.EmbeddingServer).ResourceVersion) {
			answer.(*embedopsv1.EmbeddingServer).DeepCopyInto(server)
			return nil
		}
	}
	return c.apiReader.Get(ctx, key, obj, opts...)
}

// ForgetCaughtUp drops the answer kept for a server the cache now shows at
// or past it; an informer event handler, so no answer outlives the cache's
// catching up, also for a server no reconcile reads again.
func (c RecordingWriter) ForgetCaughtUp(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	server, ok := obj.(*embedopsv1.EmbeddingServer)
	if !ok {
		return
	}
	if key := client.ObjectKeyFromObject(server); c.answers != nil && !c.writes.Behind(key, server.ResourceVersion) {
		c.answers.Delete(key)
	}
}

// remember records a write's answer: its resourceVersion and, for a
// server, the object.
func (c RecordingWriter) remember(obj client.Object) {
	key := client.ObjectKeyFromObject(obj)
	c.writes.Record(key, obj.GetResourceVersion())
	if server, ok := obj.(*embedopsv1.EmbeddingServer); ok && c.answers != nil && !c.writes.Behind(key, server.ResourceVersion) {
		c.answers.Store(key, server.DeepCopy())
	}
}

// Patch patches obj and records its new resourceVersion.
func (c RecordingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	c.remember(obj)
	return nil
}

// Status returns the status writer, recording too.
func (c RecordingWriter) Status() client.SubResourceWriter {
	return recordingStatusWriter{SubResourceWriter: c.Client.Status(), writer: c}
}

// recordingStatusWriter records the resourceVersion of each status patch.
type recordingStatusWriter struct {
	client.SubResourceWriter
	writer RecordingWriter
}

// Patch patches obj's status and records its new resourceVersion.
func (c recordingStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := c.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	c.writer.remember(obj)
	return nil
}
