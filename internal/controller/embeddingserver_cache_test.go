package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

func TestCacheForFollowsTheDecision(t *testing.T) {
	perReplica := embeddingServer("models", "tei", withCacheSize("40Gi"), func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.StorageClassName = "fast"
	})
	d, err := decision.For(perReplica)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	t.Run("per replica", func(t *testing.T) {
		g := NewWithT(t)
		cache, err := cacheFor(perReplica)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cache.Mode).To(Equal(embedopsv1.CacheModePerReplica))
		g.Expect(cache.TemplateName).To(Equal(decision.ClaimTemplateName(d)))
		g.Expect(cache.TemplateName).To(MatchRegexp(`^cache-[0-9a-f]{10}$`))
		g.Expect(cache.StorageClassName).To(Equal("fast"))
		g.Expect(cache.Size.Cmp(resource.MustParse("40Gi"))).To(BeZero())
		g.Expect(cache.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}))
	})
	t.Run("a new size is a new template", func(t *testing.T) {
		g := NewWithT(t)
		cache, err := cacheFor(embeddingServer("models", "tei", withCacheSize("80Gi")))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cache.TemplateName).NotTo(Equal(decision.ClaimTemplateName(d)))
	})
	t.Run("shared", func(t *testing.T) {
		g := NewWithT(t)
		cache, err := cacheFor(embeddingServer("models", "tei", withCacheMode(embedopsv1.CacheModeShared)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cache.Mode).To(Equal(embedopsv1.CacheModeShared))
		g.Expect(cache.ClaimName).NotTo(BeEmpty())
		g.Expect(cache.TemplateName).To(BeEmpty())
	})
	t.Run("none", func(t *testing.T) {
		g := NewWithT(t)
		cache, err := cacheFor(embeddingServer("models", "tei", withCacheMode(embedopsv1.CacheModeNone)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cache).To(BeNil())
	})
	t.Run("invalid", func(t *testing.T) {
		g := NewWithT(t)
		_, err := cacheFor(embeddingServer("models", "tei", withCacheMode("Local")))
		g.Expect(err).To(MatchError(decision.ErrInvalidSpec))
	})
}
