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

// recordingOf is a binding named name recording d.
func recordingOf(d *decision.Decision, name string, options ...bindingOption) *embedopsv1.ModelCacheBinding {
	b := testBinding(options...)
	b.Name, b.Spec.Identity, b.Spec.Decision = name, d.Identity, d.Decision
	return b
}

// successorOf is a binding named name recording d that took over the
// storage of predecessor.
func successorOf(d *decision.Decision, name string, predecessor *embedopsv1.ModelCacheBinding) *embedopsv1.ModelCacheBinding {
	b := recordingOf(d, name)
	b.Spec.Supersedes = predecessor.Name
	b.Spec.Resources.StorageName = decision.StorageName(predecessor)
	b.Spec.Resources.ClaimTemplateName = decision.ClaimTemplateNameFor(predecessor)
	return b
}

func TestSameStorageIgnoresRetainForAlone(t *testing.T) {
	server := func(options ...fixtures.Option) *decision.Decision {
		return decisionOf(t, fixtures.EmbeddingServer("models", "tei", append(options, fixtures.WithDefaults())...))
	}
	recorded := recordingOf(server(), "b")
	cases := []struct {
		name string
		d    *decision.Decision
		same bool
	}{
		{"the same decision", server(), true},
		{"another retainFor", server(fixtures.WithRetainFor(48 * time.Hour)), true},
		{"retainFor 0", server(fixtures.WithRetainFor(0)), true},
		{"another size", server(fixtures.WithCacheSize("20Gi")), false},
		{"another class", server(fixtures.WithStorageClass("fast")), false},
		{"another mode", server(fixtures.WithCacheMode(embedopsv1.CacheModeShared)), false},
		{"another revision", server(fixtures.WithModel(fixtures.Model, "v2")), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decision.SameStorage(recorded, tc.d)).To(Equal(tc.same))
		})
	}
}

func TestSupersedableOnlyByItsOnlyUser(t *testing.T) {
	g := NewWithT(t)
	g.Expect(decision.Supersedable(testBinding(withPhase(embedopsv1.BindingActive), withReference("a")), "a")).To(BeTrue())
	g.Expect(decision.Supersedable(testBinding(withReference("a")), "a")).To(BeTrue(), "a new binding is Active")
	g.Expect(decision.Supersedable(testBinding(withReference("a"), withReference("b")), "a")).To(BeFalse(), "another server uses it")
	g.Expect(decision.Supersedable(testBinding(withReference("b")), "a")).To(BeFalse())
	g.Expect(decision.Supersedable(testBinding(), "a")).To(BeFalse(), "an idle binding may retire at any time")
	g.Expect(decision.Supersedable(testBinding(withPhase(embedopsv1.BindingRetiring), withReference("a")), "a")).To(BeFalse())
	g.Expect(decision.Supersedable(testBinding(withReference("a"), withDeletion(time.Unix(1, 0))), "a")).To(BeFalse())
}

func TestSuccessorTakesOverTheStorageNames(t *testing.T) {
	g := NewWithT(t)
	d := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithDefaults()))
	longer := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithRetainFor(48*time.Hour), fixtures.WithDefaults()))
	longest := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithRetainFor(72*time.Hour), fixtures.WithDefaults()))
	root := recordingOf(d, decision.BindingName(d))
	g.Expect(decision.StorageName(root)).To(Equal(root.Name), "a binding without a recorded storage name is known by its own")
	g.Expect(decision.ClaimTemplateNameFor(root)).To(Equal(decision.ClaimTemplateName(d)))
	g.Expect(decision.ClaimTemplateNameFor(recordingOf(d, root.Name+"-2"))).To(Equal(decision.ClaimTemplateName(d) + "-2"))

	first := successorOf(longer, decision.BindingName(longer), root)
	second := successorOf(longest, decision.BindingName(longest), first)
	for _, b := range []*embedopsv1.ModelCacheBinding{first, second} {
		g.Expect(decision.StorageName(b)).To(Equal(root.Name), "a chain keeps the root's names")
		g.Expect(decision.ClaimNamesFor(b, "tei", 2)).To(Equal(decision.ClaimNamesFor(root, "tei", 2)))
	}
	g.Expect(decision.Succeeds(first, root)).To(BeTrue())
	g.Expect(decision.Succeeds(second, first)).To(BeTrue())
	g.Expect(decision.Succeeds(second, root)).To(BeFalse(), "a successor records the binding it superseded")
	g.Expect(decision.Succeeds(recordingOf(longer, first.Name), root)).To(BeFalse(), "a binding of the same name with storage of its own")

	shared := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithDefaults()))
	sharedRoot := recordingOf(shared, "shared")
	g.Expect(decision.ClaimNamesFor(successorOf(shared, "shared-2", sharedRoot), "tei", 3)).To(Equal([]string{"shared"}))
	g.Expect(decision.InheritedClaimNames([]string{"a-0", "a-1", "a-2"}, []string{"a-0", "a-1", "b"})).To(Equal([]string{"a-0", "a-1", "a-2", "b"}))
}

func TestAHandingOverBindingIsNotUsedAgain(t *testing.T) {
	g := NewWithT(t)
	d := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithDefaults()))
	marked := recordingOf(d, "b", withPhase(embedopsv1.BindingActive), withReference("a"), func(b *embedopsv1.ModelCacheBinding) {
		b.Status.SupersededBy = "b-2"
	})
	g.Expect(decision.HandingOver(marked)).To(BeTrue())
	g.Expect(decision.Reusable(marked, d)).To(BeFalse())
	g.Expect(decision.Usable(marked, d, "a")).To(BeFalse(), "not even by the server that references it")
}

func TestSupersedeReleasesWithoutAnIdleWindow(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	b := testBinding(withPhase(embedopsv1.BindingActive), withReference("a"), withIdle(now, now), func(b *embedopsv1.ModelCacheBinding) {
		b.Status.SupersededBy = "b-2"
	})
	decision.Supersede(b, now)
	g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingReleased))
	g.Expect(b.Status.ReleasedAt.Time).To(Equal(now))
	g.Expect(b.Status.RequestReferences).To(BeEmpty())
	g.Expect(b.Status.IdleSince).To(BeNil())
	ready := decision.BindingReadiness(b, nil)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(embedopsv1.SupersededReason))
	g.Expect(ready.Message).To(ContainSubstring("b-2"))
}

func TestSuccessorOwnsTheClaimsLabelledWithItsStorage(t *testing.T) {
	g := NewWithT(t)
	d := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithDefaults()))
	root := recordingOf(d, "root")
	taken := successorOf(d, "root-2", root)
	labelled := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{embedopsv1.CacheBindingLabel: name}}}
	}
	g.Expect(decision.ClaimOwnership(taken, labelled("root"))).To(BeEmpty())
	g.Expect(decision.ClaimOwnership(taken, labelled("other"))).To(ContainSubstring("embedops.dev/cache-binding=root"))
	controlled := labelled("root")
	controlled.OwnerReferences = []metav1.OwnerReference{{Kind: embedopsv1.ModelCacheBindingKind, Name: "root", UID: "root-uid", Controller: new(true)}}
	g.Expect(decision.ClaimOwnership(taken, controlled)).NotTo(BeEmpty(), "a Shared claim is the successor's once its controller reference moved")
}

func TestSuccessionOfNamesTheKindByTheDecisionsAlone(t *testing.T) {
	server := func(options ...fixtures.Option) *decision.Decision {
		return decisionOf(t, fixtures.EmbeddingServer("models", "tei", append(options, fixtures.WithDefaults())...))
	}
	from := server()
	cases := []struct {
		name string
		d    *decision.Decision
		want decision.Succession
	}{
		{"another retainFor", server(fixtures.WithRetainFor(48 * time.Hour)), decision.RetainForSuccession},
		{"a larger size", server(fixtures.WithCacheSize("20Gi")), decision.GrowthSuccession},
		{"a smaller size", server(fixtures.WithCacheSize("5Gi")), decision.NoSuccession},
		{"another revision", server(fixtures.WithModel(fixtures.Model, "v2")), decision.RevisionSuccession},
		{"another revision, larger", server(fixtures.WithModel(fixtures.Model, "v2"), fixtures.WithCacheSize("20Gi")), decision.RevisionSuccession},
		{"another class", server(fixtures.WithStorageClass("fast")), decision.NoSuccession},
		{"another mode", server(fixtures.WithCacheMode(embedopsv1.CacheModeShared)), decision.NoSuccession},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decision.SuccessionOf(from, tc.d)).To(Equal(tc.want))
		})
	}
}
