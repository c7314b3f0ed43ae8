package decision_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

func withExistingClaim(claim string) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { fixtures.WithExistingClaim(claim)(es) }
}

func TestForRecordsAnExistingClaimAsNotOwned(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server(withDefaults, withExistingClaim("models")))

	g.Expect(d.Decision.ExistingClaim).To(Equal("models"))
	g.Expect(d.Decision.ReclaimPolicy).To(Equal(embedopsv1.ReclaimPolicyRetain))
	g.Expect(d.Decision.Mode).To(Equal(embedopsv1.CacheModeShared), "every replica mounts the one claim")
	g.Expect(d.Decision.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}))
	g.Expect(d.Decision.Size.IsZero()).To(BeTrue(), "the claim's own size, not the schema's default")
	g.Expect(d.Decision.StorageClassName).To(BeEmpty())
	g.Expect(d.Identity.SharingDomain).To(Equal("team-a"))
	g.Expect(decision.ClaimNamesOf(d, decision.BindingName(d), "embed", 3)).To(BeEmpty(), "the binding holds no claim of its own")

	binding := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: decision.BindingName(d)},
		Spec:       embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision},
	}
	g.Expect(decision.ClaimNamesFor(binding, "embed", 3)).To(BeEmpty())
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "team-a", Name: "models",
		Labels: map[string]string{embedopsv1.CacheBindingLabel: binding.Name},
	}}
	g.Expect(decision.ClaimOwnership(binding, claim)).To(ContainSubstring("existingClaim"),
		"even a claim labelled as the binding's is not its to delete when it is the existing claim")
}

func TestForExistingClaimDigest(t *testing.T) {
	g := NewWithT(t)
	plain := mustDecide(g, server(withDefaults))
	existing := mustDecide(g, server(withDefaults, withExistingClaim("models")))
	other := mustDecide(g, server(withDefaults, withExistingClaim("other")))
	g.Expect(existing.Decision.Digest).To(MatchRegexp(digestPattern))
	g.Expect(existing.Decision.Digest).NotTo(Equal(other.Decision.Digest), "the claim's name is in the digest")
	g.Expect(decision.BindingName(existing)).NotTo(Equal(decision.BindingName(other)))
	g.Expect(decision.SameStoragePart(existing, other)).To(BeFalse())
	g.Expect(decision.SameStoragePart(plain, existing)).To(BeFalse())

	longer := mustDecide(g, server(withDefaults, withExistingClaim("models"), func(es *embedopsv1.EmbeddingServer) {
		fixtures.WithRetainFor(time.Hour)(es)
	}))
	g.Expect(decision.SameStoragePart(existing, longer)).To(BeTrue(), "retainFor alone changes no storage")

	recomputed, err := decision.Digest(existing.Identity, existing.Decision)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recomputed).To(Equal(existing.Decision.Digest), "an audit recomputes it from the binding")
}

func TestForExistingClaimIgnoresTheDefaultedModeAndSize(t *testing.T) {
	g := NewWithT(t)
	defaulted := mustDecide(g, server(withDefaults, withExistingClaim("models")))
	bare := mustDecide(g, server(withExistingClaim("models")))
	g.Expect(bare.Decision.Digest).To(Equal(defaulted.Decision.Digest), "a manifest from git decides as the API server's object does")
}

func TestCacheReadinessOfAnExistingClaim(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server(withDefaults, withExistingClaim("models")))
	binding := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec:       embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision},
		Status:     embedopsv1.ModelCacheBindingStatus{Phase: embedopsv1.BindingActive},
	}
	ready := decision.CacheReadiness(binding, nil)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(ready.Message).To(ContainSubstring("existing claim models, which it does not own"))
}

func TestPlanDownloadsNothingIntoAnExistingClaim(t *testing.T) {
	g := NewWithT(t)
	before := fixtures.EmbeddingServer("ns", "a")
	after := fixtures.EmbeddingServer("ns", "a", fixtures.WithExistingClaim("models"))

	plan, err := decision.NewPlan([]*embedopsv1.EmbeddingServer{before}, []*embedopsv1.EmbeddingServer{after}, decision.Facts{})

	g.Expect(err).NotTo(HaveOccurred())
	change := changeOf(g, plan, "ns/a")
	g.Expect(actions(change)).To(Equal([]decision.Action{decision.ActionCreate, decision.ActionRetire}))
	g.Expect(change.Rolls).To(BeTrue())
	g.Expect(change.Caches[0].Download.Copies).To(BeZero(), "the user filled the claim")
}
