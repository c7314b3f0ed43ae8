package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
)

// TestNamespaceWithLongLivedCachesDeletesPromptly deletes a namespace whose
// servers hold caches with a day of retainFor, PerReplica and Shared: the
// namespace controller deletes the servers, they leave their bindings, and
// the bindings, deleted and referenced by nothing, release at once.
func TestNamespaceWithLongLivedCachesDeletesPromptly(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-namespace-deletion-"}}
	g.Expect(cluster.Client.Create(t.Context(), ns)).To(Succeed())
	servers := []*embedopsv1.EmbeddingServer{
		fixtures.EmbeddingServer(ns.Name, "per-replica", fixtures.WithRetainFor(24*time.Hour), fixtures.WithCacheSize("1Gi")),
		fixtures.EmbeddingServer(ns.Name, "shared", fixtures.WithRetainFor(24*time.Hour), fixtures.WithCacheSize("1Gi"),
			fixtures.WithCacheMode(embedopsv1.CacheModeShared)),
	}
	for _, server := range servers {
		g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	}
	for _, server := range servers {
		expectReady(t, client.ObjectKeyFromObject(server), metav1.ConditionTrue, embedopsv1.AvailableReason)
	}

	g.Expect(cluster.Client.Delete(t.Context(), ns)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(ns), &corev1.Namespace{}))
	}).WithTimeout(settle).WithPolling(time.Second).Should(BeTrue(), "the namespace is held by a binding's retainFor")
}
