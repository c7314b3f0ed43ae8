package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/act"
	"github.com/embedops/embedops/internal/controller/writes"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// staleServerCache serves the next read of a server from a copy kept when
// armed, as an informer that has not seen the latest writes would; every
// other read, and every write, goes through.
type staleServerCache struct {
	client.Client
	mu     sync.Mutex
	stale  map[client.ObjectKey]*embedopsv1.EmbeddingServer
	served int
}

// Get returns the armed copy of a server once.
func (c *staleServerCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if server, ok := obj.(*embedopsv1.EmbeddingServer); ok {
		c.mu.Lock()
		old, armed := c.stale[key]
		if armed {
			delete(c.stale, key)
			c.served++
		}
		c.mu.Unlock()
		if armed {
			old.DeepCopyInto(server)
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// arm makes the next read of the server return it as it is now.
func (c *staleServerCache) arm(server *embedopsv1.EmbeddingServer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stale[client.ObjectKeyFromObject(server)] = server.DeepCopy()
}

// servedCount is how many stale copies were read.
func (c *staleServerCache) servedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.served
}

// markStatefulSetNotReady plays the StatefulSet controller losing every
// ready replica.
func markStatefulSetNotReady(t *testing.T, g *WithT, key types.NamespacedName) {
	t.Helper()
	g.Eventually(func() error {
		sts := &appsv1.StatefulSet{}
		if err := env.Client.Get(t.Context(), key, sts); err != nil {
			return err
		}
		sts.Status.ReadyReplicas, sts.Status.AvailableReplicas = 0, 0
		return env.Client.Status().Update(t.Context(), sts)
	}).Should(Succeed())
}

// A reconcile that starts from a cached copy older than the controller's own
// last status write must not patch its status as a diff from that copy: the
// copy already shows the values computed now, the diff is empty, and the
// API server would keep the phase written since (the e2e scale test once
// saw Ready=True with phase Pending, for good).
func TestAStaleCachedServerIsNotTheBaseOfItsStatusPatch(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	cache := &staleServerCache{stale: map[client.ObjectKey]*embedopsv1.EmbeddingServer{}}
	startManagerWrapping(t, namespace, func(c client.Client) client.Client { cache.Client = c; return cache },
		// No timed requeue may hide the stale read: only watch events
		// reconcile.
		func(o *ManagerOptions) { o.EmbeddingServer.ProgressInterval = time.Hour })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)

	markStatefulSetReady(t, g, key)
	ready := waitForPhase(t, g, key, embedopsv1.PhaseReady)
	markStatefulSetNotReady(t, g, key)
	waitForPhase(t, g, key, embedopsv1.PhasePending)

	// The reconcile of the next StatefulSet event reads the server as it was
	// when Ready.
	cache.arm(ready)
	markStatefulSetReady(t, g, key)
	server := waitForPhase(t, g, key, embedopsv1.PhaseReady)
	g.Expect(cache.servedCount()).To(Equal(1), "the reconcile read the stale copy")
	g.Expect(server.Status.ReadyReplicas).To(Equal(int32(1)))
	checkConditions(t, g, key)
}

// The status patcher reads the latest server through act.RecordingWriter to
// patch its conditions with an optimistic lock: a copy older than the last
// write must come from the API server, or every retry is a Conflict.
func TestRecordingWriterReadsTheServerUncachedWhenTheCacheIsBehind(t *testing.T) {
	t.Parallel()
	g, key, stale := createdServer(t)
	updateServer(t, g, key, fixtures.WithReplicas(3))
	live := getServer(t, g, key)

	cache := &staleServerCache{Client: env.Client, stale: map[client.ObjectKey]*embedopsv1.EmbeddingServer{}}
	var versions writes.Versions
	writer := act.NewRecordingWriter(cache, env.Client, &versions, false)

	cache.arm(stale)
	read := &embedopsv1.EmbeddingServer{}
	g.Expect(writer.Get(t.Context(), key, read)).To(Succeed())
	g.Expect(read.ResourceVersion).To(Equal(stale.ResourceVersion), "nothing written: the cache is trusted")

	versions.Record(key, live.ResourceVersion)
	cache.arm(stale)
	g.Expect(writer.Get(t.Context(), key, read)).To(Succeed())
	g.Expect(read.ResourceVersion).To(Equal(live.ResourceVersion))
	g.Expect(read.Spec.Replicas).To(HaveValue(Equal(int32(3))))
	g.Expect(cache.servedCount()).To(Equal(2))
}

// The answer to the last write stands in for the API server while the
// cache is behind it, and is dropped once the informer shows the write.
func TestRecordingWriterReadsItsLastAnswerUntilTheCacheCatchesUp(t *testing.T) {
	t.Parallel()
	g, key, stale := createdServer(t)

	requests := newWriteCounter()
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(requests.wrap)
	counted, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	cache := &staleServerCache{Client: counted, stale: map[client.ObjectKey]*embedopsv1.EmbeddingServer{}}
	var versions writes.Versions
	writer := act.NewRecordingWriter(cache, counted, &versions, true)

	written := stale.DeepCopy()
	patch := client.MergeFrom(stale.DeepCopy())
	written.Annotations = map[string]string{"written": "yes"}
	g.Expect(writer.Patch(t.Context(), written, patch)).To(Succeed())

	cache.arm(stale)
	read := &embedopsv1.EmbeddingServer{}
	before := requests.requestSnapshot()
	g.Expect(writer.Get(t.Context(), key, read)).To(Succeed())
	g.Expect(read.ResourceVersion).To(Equal(written.ResourceVersion), "the answer, not the stale copy")
	g.Expect(read.Annotations).To(HaveKeyWithValue("written", "yes"))
	g.Expect(requests.requestsSince(before)).NotTo(HaveKey("GET embeddingservers"), "no uncached read")

	writer.ForgetCaughtUp(stale)
	cache.arm(stale)
	g.Expect(writer.Get(t.Context(), key, read)).To(Succeed())
	g.Expect(requests.requestsSince(before)).NotTo(HaveKey("GET embeddingservers"), "an older copy in the cache keeps the answer")
	writer.ForgetCaughtUp(written)
	cache.arm(stale)
	g.Expect(writer.Get(t.Context(), key, read)).To(Succeed())
	g.Expect(requests.requestsSince(before)).To(HaveKeyWithValue("GET embeddingservers", 1), "the cache showing the write drops the answer: a stale copy is read again uncached")
}

// createdServer creates a server in a namespace of its own and reads it
// back.
func createdServer(t *testing.T) (*WithT, types.NamespacedName, *embedopsv1.EmbeddingServer) {
	t.Helper()
	g := newG(t)
	key := createServer(t, g, fixtures.EmbeddingServer(harness.Namespace(t, env.Client), "tei"))
	return g, key, getServer(t, g, key)
}
