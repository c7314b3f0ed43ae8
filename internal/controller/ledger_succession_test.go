package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// errDied stands for a controller killed between two writes.
var errDied = errors.New("the controller died")

// dyingCreates fails every binding creation while dead is set.
type dyingCreates struct {
	client.Client
	dead *atomic.Bool
}

func (c dyingCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*embedopsv1.ModelCacheBinding); ok && c.dead.Load() {
		return errDied
	}
	return c.Client.Create(ctx, obj, opts...)
}

// clock is a settable ledger clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// withRetainFor returns the server's decision after a retainFor edit.
func withRetainFor(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer, retainFor time.Duration) *decision.Decision {
	t.Helper()
	fixtures.WithRetainFor(retainFor)(server)
	d, err := decision.For(server)
	g.Expect(err).NotTo(HaveOccurred())
	return d
}

// readBinding reads a binding uncached.
func readBinding(t *testing.T, g Gomega, c client.Client, binding *embedopsv1.ModelCacheBinding) *embedopsv1.ModelCacheBinding {
	t.Helper()
	fresh := &embedopsv1.ModelCacheBinding{}
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(binding), fresh)).To(Succeed())
	return fresh
}

// superseded fails unless binding is Released as Superseded by successor.
func superseded(g Gomega, binding *embedopsv1.ModelCacheBinding, successor string) {
	g.Expect(binding.Status.Phase).To(Equal(embedopsv1.BindingReleased))
	g.Expect(binding.Status.SupersededBy).To(Equal(successor))
	g.Expect(binding.Status.RequestReferences).To(BeEmpty())
}

func TestSuccessionCompletesAfterTheControllerDiesBetweenItsWrites(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	dead := &atomic.Bool{}
	l, c := newTestLedger(t, g, func(c client.Client) client.Client { return dyingCreates{Client: c, dead: dead} })
	server := liveServer(t, g, c, namespace, "tei", fixtures.WithRetainFor(time.Hour))
	old, err := l.Bind(t.Context(), server, withRetainFor(t, g, server, time.Hour), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	server.Status.CacheBinding = old.Binding.Name

	// Dies after marking the predecessor, before creating its successor.
	longer := withRetainFor(t, g, server, 2*time.Hour)
	dead.Store(true)
	_, err = l.Bind(t.Context(), server, longer, unknownSource)
	g.Expect(err).To(MatchError(errDied))
	marked := readBinding(t, g, c, old.Binding)
	g.Expect(marked.Status.SupersededBy).To(Equal(decision.BindingName(longer)))
	g.Expect(marked.Status.Phase).To(Equal(embedopsv1.BindingActive))

	// A new process takes the same step again, then dies before leaving.
	restarted, _ := newTestLedger(t, g, nil)
	bound, err := restarted.Bind(t.Context(), server, longer, unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	successor := bound.Binding
	g.Expect(successor.Name).To(Equal(marked.Status.SupersededBy))
	g.Expect(successor.Spec.Supersedes).To(Equal(old.Binding.Name))
	g.Expect(decision.ClaimNamesFor(successor, server.Name, 1)).To(Equal(decision.ClaimNamesFor(old.Binding, server.Name, 1)))
	g.Expect(decision.HasReference(readBinding(t, g, c, old.Binding), server.UID)).To(BeTrue(), "the predecessor keeps its reference until it is left")

	// It records what its predecessor realized: the server keeps the
	// commit its pods run.
	commit := strings.Repeat("c", 40)
	_, err = restarted.RecordRealized(t.Context(), readBinding(t, g, c, old.Binding), &embedopsv1.RealizedCache{ResolvedCommit: commit})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		b, err := restarted.Bind(t.Context(), server, longer, unknownSource)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Binding.Status.Realized).NotTo(BeNil())
		g.Expect(b.Binding.Status.Realized.ResolvedCommit).To(Equal(commit))
	}).Should(Succeed())

	// Another process leaves the predecessor: superseded, not idle.
	again, _ := newTestLedger(t, g, nil)
	g.Expect(again.Leave(t.Context(), server, successor.Name)).To(Succeed())
	superseded(g, readBinding(t, g, c, old.Binding), successor.Name)
	after := readBinding(t, g, c, successor)
	g.Expect(after.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(decision.HasReference(after, server.UID)).To(BeTrue())
}

func TestHandedOverBindingOfAGoneServerIsSupersededNotRetired(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	now := &clock{now: time.Now()}
	l, c := newTestLedger(t, g, nil, ledger.Options{Now: now.Now})
	server := liveServer(t, g, c, namespace, "tei", fixtures.WithRetainFor(time.Minute))
	old, err := l.Bind(t.Context(), server, withRetainFor(t, g, server, time.Minute), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	server.Status.CacheBinding = old.Binding.Name
	claimNames := old.Binding.Spec.Resources.PersistentVolumeClaimNames
	for _, name := range claimNames {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{embedopsv1.CacheBindingLabel: old.Binding.Name}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: old.Binding.Spec.Decision.Size}},
			},
		}
		g.Expect(c.Create(t.Context(), claim)).To(Succeed())
	}
	bound, err := l.Bind(t.Context(), server, withRetainFor(t, g, server, 0), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	successor := bound.Binding

	// The server goes before it left the predecessor: both bindings hold
	// its reference, which the binding reconciler drops as dangling.
	live := &embedopsv1.EmbeddingServer{}
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(server), live)).To(Succeed())
	controllerutil.RemoveFinalizer(live, embedopsv1.ServerFinalizer)
	g.Expect(c.Update(t.Context(), live)).To(Succeed())
	g.Expect(c.Delete(t.Context(), live)).To(Succeed())
	advance := func(b *embedopsv1.ModelCacheBinding) {
		t.Helper()
		g.Eventually(func() error {
			_, err := l.Advance(t.Context(), readBinding(t, g, c, b))
			return err
		}).Should(Succeed())
	}

	// The successor's retainFor (0s) is over, its predecessor's is not:
	// it waits, since the storage is not its own yet.
	advance(successor)
	advance(successor)
	g.Expect(readBinding(t, g, c, successor).Status.Phase).To(Equal(embedopsv1.BindingActive))
	advance(old.Binding)
	now.advance(2 * time.Minute)
	advance(old.Binding)
	superseded(g, readBinding(t, g, c, old.Binding), successor.Name)

	// Now the successor retires, and it is the one that deletes the claims.
	g.Eventually(func(g Gomega) {
		b := readBinding(t, g, c, successor)
		_, err := l.Advance(t.Context(), b)
		g.Expect(err).NotTo(HaveOccurred())
		gone := claimsGone(t, g, namespace, claimNames)
		g.Expect(readBinding(t, g, c, successor).Status.Phase).To(Equal(embedopsv1.BindingReleased))
		g.Expect(gone).To(BeTrue())
	}).Should(Succeed())
	g.Expect(readBinding(t, g, c, old.Binding).Status.ReleasedAt).NotTo(BeNil())
	g.Expect(readBinding(t, g, c, old.Binding).Status.RetireAfter).To(BeNil(), "the predecessor never retired")
}

// unseenBindings is a cache that has not seen the named bindings yet: Get
// finds them not, List leaves them out.
type unseenBindings struct {
	client.Client
	names map[string]bool
}

func (c unseenBindings) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*embedopsv1.ModelCacheBinding); ok && c.names[key.Name] {
		return apierrors.NewNotFound(embedopsv1.GroupVersion.WithResource("modelcachebindings").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c unseenBindings) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if bindings, ok := list.(*embedopsv1.ModelCacheBindingList); ok {
		bindings.Items = slices.DeleteFunc(bindings.Items, func(b embedopsv1.ModelCacheBinding) bool { return c.names[b.Name] })
	}
	return nil
}

func TestASuccessorTheCacheHasNotSeenIsUsedNotSuperseded(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	unseen := map[string]bool{}
	l, c := newTestLedger(t, g, func(c client.Client) client.Client { return unseenBindings{Client: c, names: unseen} })
	server := liveServer(t, g, c, namespace, "tei", fixtures.WithRetainFor(time.Hour))
	old, err := l.Bind(t.Context(), server, withRetainFor(t, g, server, time.Hour), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	server.Status.CacheBinding = old.Binding.Name
	longer := withRetainFor(t, g, server, 2*time.Hour)
	bound, err := l.Bind(t.Context(), server, longer, unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	server.Status.CacheBinding = bound.Binding.Name

	unseen[bound.Binding.Name] = true
	again, err := l.Bind(t.Context(), server, longer, unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Binding.Name).To(Equal(bound.Binding.Name))
	g.Expect(again.Created).To(BeFalse())
	g.Expect(readBinding(t, g, c, bound.Binding).Status.SupersededBy).To(BeEmpty())
	var bindings embedopsv1.ModelCacheBindingList
	g.Expect(c.List(t.Context(), &bindings, client.InNamespace(namespace))).To(Succeed())
	g.Expect(bindings.Items).To(HaveLen(2))
}
