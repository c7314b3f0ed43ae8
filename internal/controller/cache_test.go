package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

// decisionOf is the cache decision of a test server.
func decisionOf(t *testing.T, server *embedopsv1.EmbeddingServer) *decision.Decision {
	t.Helper()
	d, err := decision.For(server)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return d
}

// recording is a binding named name that records d.
func recording(d *decision.Decision, name string) *embedopsv1.ModelCacheBinding {
	return &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision},
	}
}

func TestCacheOfFollowsTheDecisionAndTheBinding(t *testing.T) {
	perReplica := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithCacheSize("40Gi"), func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.StorageClassName = "fast"
	}))

	t.Run("per replica", func(t *testing.T) {
		g := NewWithT(t)
		cache := cacheOf(perReplica, recording(perReplica, decision.BindingName(perReplica)), "")
		g.Expect(cache.Mode).To(Equal(embedopsv1.CacheModePerReplica))
		g.Expect(cache.TemplateName).To(Equal(decision.ClaimTemplateName(perReplica)))
		g.Expect(cache.TemplateName).To(MatchRegexp(`^cache-[0-9a-f]{10}$`))
		g.Expect(cache.StorageClassName).To(Equal("fast"))
		g.Expect(cache.Size.Cmp(resource.MustParse("40Gi"))).To(BeZero())
		g.Expect(cache.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}))
	})
	t.Run("a suffixed binding has its own template", func(t *testing.T) {
		g := NewWithT(t)
		cache := cacheOf(perReplica, recording(perReplica, decision.BindingName(perReplica)+"-3"), "")
		g.Expect(cache.TemplateName).To(Equal(decision.ClaimTemplateName(perReplica) + "-3"))
	})
	t.Run("a new size is a new template", func(t *testing.T) {
		g := NewWithT(t)
		other := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithCacheSize("80Gi")))
		g.Expect(cacheOf(other, recording(other, decision.BindingName(other)), "").TemplateName).NotTo(Equal(decision.ClaimTemplateName(perReplica)))
	})
	t.Run("shared mounts the binding's claim", func(t *testing.T) {
		g := NewWithT(t)
		shared := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithCacheMode(embedopsv1.CacheModeShared)))
		cache := cacheOf(shared, recording(shared, "bge-small-en-v1-5-abc-2"), "")
		g.Expect(cache.Mode).To(Equal(embedopsv1.CacheModeShared))
		g.Expect(cache.ClaimName).To(Equal("bge-small-en-v1-5-abc-2"))
		g.Expect(cache.TemplateName).To(BeEmpty())
	})
	t.Run("a successor keeps the storage it took over", func(t *testing.T) {
		g := NewWithT(t)
		longer := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithCacheSize("40Gi"), fixtures.WithRetainFor(48*time.Hour), func(s *embedopsv1.EmbeddingServer) {
			s.Spec.Cache.StorageClassName = "fast"
		}))
		successor := recording(longer, decision.BindingName(longer))
		successor.Spec.Resources.StorageName = decision.BindingName(perReplica)
		successor.Spec.Resources.ClaimTemplateName = decision.ClaimTemplateName(perReplica)
		cache := cacheOf(longer, successor, "")
		g.Expect(cache.Binding).To(Equal(decision.BindingName(perReplica)))
		g.Expect(cache.TemplateName).To(Equal(decision.ClaimTemplateName(perReplica)))
		g.Expect(cacheOf(perReplica, recording(perReplica, decision.BindingName(perReplica)), "")).To(Equal(cache))
	})
}
