package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// laggingCache reads bindings as an informer that has not seen the latest
// writes yet: a binding set here is returned as it was when set, and a
// binding unlisted here is missing from lists. Every other read, and every
// write, goes to the wrapped client.
type laggingCache struct {
	client.Client
	mu       sync.Mutex
	bindings map[client.ObjectKey]*embedopsv1.ModelCacheBinding
	unlisted map[client.ObjectKey]bool
}

// List leaves out the unlisted bindings.
func (c *laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if bindings, ok := list.(*embedopsv1.ModelCacheBindingList); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		bindings.Items = slices.DeleteFunc(bindings.Items, func(b embedopsv1.ModelCacheBinding) bool {
			return c.unlisted[client.ObjectKeyFromObject(&b)]
		})
	}
	return nil
}

// unlist leaves binding out of lists, as a cache that has not seen it.
func (c *laggingCache) unlist(binding *embedopsv1.ModelCacheBinding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unlisted[client.ObjectKeyFromObject(binding)] = true
}

// Get returns the lagging copy of a binding when there is one.
func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if binding, ok := obj.(*embedopsv1.ModelCacheBinding); ok {
		c.mu.Lock()
		old, lagging := c.bindings[key]
		c.mu.Unlock()
		if lagging {
			old.DeepCopyInto(binding)
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// lag keeps returning binding as it is now.
func (c *laggingCache) lag(binding *embedopsv1.ModelCacheBinding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bindings[client.ObjectKeyFromObject(binding)] = binding.DeepCopy()
}

// catchUp forgets the lagging copies.
func (c *laggingCache) catchUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.bindings)
	clear(c.unlisted)
}

func TestRevertToALeftBindingReferencesItAgain(t *testing.T) {
	t.Parallel()
	g := newG(t)
	cache := &laggingCache{bindings: map[client.ObjectKey]*embedopsv1.ModelCacheBinding{}, unlisted: map[client.ObjectKey]bool{}}
	l, c := newTestLedger(t, g, func(c client.Client) client.Client { cache.Client = c; return cache })

	// 200 rounds, 20 to a namespace, so Leave's list stays short.
	const rounds, perNamespace = 200, 20
	var namespace string
	for round := range rounds {
		if round%perNamespace == 0 {
			namespace = harness.Namespace(t, env.Client)
		}
		server := liveServer(t, g, c, namespace, fmt.Sprintf("s%d", round), fixtures.WithRetainFor(0), fixtures.WithStorageClass("a"))
		onA, err := decision.For(server)
		g.Expect(err).NotTo(HaveOccurred())
		moved := server.DeepCopy()
		moved.Spec.Cache.StorageClassName = "b"
		onB, err := decision.For(moved)
		g.Expect(err).NotTo(HaveOccurred())

		a, err := l.Bind(t.Context(), server, onA, unknownSource)
		g.Expect(err).NotTo(HaveOccurred())
		claims := a.Binding.Spec.Resources.PersistentVolumeClaimNames
		createClaims(t, g, namespace, server.Name, claims)
		// A -> B: the cache still shows A with the server's reference after
		// the server left it.
		cache.lag(a.Binding)
		b, err := l.Bind(t.Context(), server, onB, unknownSource)
		g.Expect(err).NotTo(HaveOccurred())
		// Nor has it seen B.
		cache.unlist(b.Binding)
		g.Expect(l.Leave(t.Context(), server, b.Binding.Name)).To(Succeed())
		// B -> A before the cache caught up.
		reverted, err := l.Bind(t.Context(), server, onA, unknownSource)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reverted.Binding.Name).To(Equal(a.Binding.Name))
		g.Expect(l.Leave(t.Context(), server, a.Binding.Name)).To(Succeed())
		cache.catchUp()

		live := &embedopsv1.ModelCacheBinding{}
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(b.Binding), live)).To(Succeed())
		g.Expect(decision.HasReference(live, server.UID)).To(BeFalse(), "round %d: the server left B, referenced moments before", round)
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(a.Binding), live)).To(Succeed())
		g.Expect(decision.HasReference(live, server.UID)).To(BeTrue(), "round %d: the server uses A, which must list it", round)
		_, err = l.Advance(t.Context(), live)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(a.Binding), live)).To(Succeed())
		g.Expect(live.Status.Phase).To(Equal(embedopsv1.BindingActive), "round %d: a binding in use never retires", round)
		for _, name := range claims {
			claim := &corev1.PersistentVolumeClaim{}
			g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, claim)).To(Succeed())
			g.Expect(claim.DeletionTimestamp).To(BeNil(), "round %d: claim %s of a binding in use was deleted", round, name)
		}
	}
}
