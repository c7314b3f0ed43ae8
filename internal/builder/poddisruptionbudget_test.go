package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func withDisruptionBudget(maxUnavailable, minAvailable *intstr.IntOrString) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.DisruptionBudget = &embedopsv1.DisruptionBudgetSpec{MaxUnavailable: maxUnavailable, MinAvailable: minAvailable}
	}
}

func withoutReplicas() fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Replicas = nil }
}

func TestPodDisruptionBudget(t *testing.T) {
	one, two, half := intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("50%")
	cases := []struct {
		name               string
		server             *embedopsv1.EmbeddingServer
		wantNone           bool
		wantMaxUnavailable *intstr.IntOrString
		wantMinAvailable   *intstr.IntOrString
	}{
		{name: "scaled to zero", server: server("s", fixtures.WithReplicas(0)), wantNone: true},
		{name: "one replica", server: server("s", fixtures.WithReplicas(1)), wantNone: true},
		{name: "replicas unset, one by default", server: server("s", withoutReplicas()), wantNone: true},
		{name: "one replica with an override", server: server("s", fixtures.WithReplicas(1), withDisruptionBudget(nil, &one)), wantNone: true},
		{name: "two replicas", server: server("s", fixtures.WithReplicas(2)), wantMaxUnavailable: &one},
		{name: "many replicas", server: server("s", fixtures.WithReplicas(10)), wantMaxUnavailable: &one},
		{name: "maxUnavailable override", server: server("s", fixtures.WithReplicas(5), withDisruptionBudget(&two, nil)), wantMaxUnavailable: &two},
		{name: "percentage override", server: server("s", fixtures.WithReplicas(4), withDisruptionBudget(&half, nil)), wantMaxUnavailable: &half},
		{name: "minAvailable override", server: server("s", fixtures.WithReplicas(3), withDisruptionBudget(nil, &two)), wantMinAvailable: &two},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			pdb := builder.PodDisruptionBudget(tc.server)
			if tc.wantNone {
				g.Expect(pdb).To(BeNil())
				return
			}
			g.Expect(pdb).NotTo(BeNil())
			g.Expect(pdb.APIVersion).To(Equal("policy/v1"))
			g.Expect(pdb.Kind).To(Equal("PodDisruptionBudget"))
			g.Expect(pdb.Name).To(Equal(tc.server.Name))
			g.Expect(pdb.Namespace).To(Equal(testNamespace))
			g.Expect(pdb.OwnerReferences).To(BeEmpty())
			g.Expect(pdb.Labels).To(Equal(builder.Labels(tc.server)))
			g.Expect(pdb.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: builder.SelectorLabels(tc.server)}))
			g.Expect(pdb.Spec.MaxUnavailable).To(Equal(tc.wantMaxUnavailable))
			g.Expect(pdb.Spec.MinAvailable).To(Equal(tc.wantMinAvailable))
		})
	}
}

func TestPodDisruptionBudgetSelectsTheStatefulSetPods(t *testing.T) {
	g := NewWithT(t)
	s := server("s", fixtures.WithReplicas(3))
	sts, err := builder.StatefulSet(s, perReplicaCache("cache-abc", "", "10Gi"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	selector, err := metav1.LabelSelectorAsSelector(builder.PodDisruptionBudget(s).Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector.Matches(labelSet(sts.Spec.Template.Labels))).To(BeTrue())
}

func TestPodDisruptionBudgetDoesNotAliasTheSpec(t *testing.T) {
	g := NewWithT(t)
	two := intstr.FromInt32(2)
	s := server("s", fixtures.WithReplicas(3), withDisruptionBudget(&two, nil))
	pdb := builder.PodDisruptionBudget(s)
	*pdb.Spec.MaxUnavailable = intstr.FromInt32(7)
	g.Expect(s.Spec.DisruptionBudget.MaxUnavailable.IntValue()).To(Equal(2))
}

func TestAllowedUnavailableScalesTheBudgetAsTheDisruptionControllerDoes(t *testing.T) {
	g := NewWithT(t)
	budget := func(b *embedopsv1.DisruptionBudgetSpec) fixtures.Option {
		return func(s *embedopsv1.EmbeddingServer) { s.Spec.DisruptionBudget = b }
	}
	cases := []struct {
		name    string
		options []fixtures.Option
		want    int32
	}{
		{"one replica has no budget", []fixtures.Option{fixtures.WithReplicas(1)}, 0},
		{"the default budget", []fixtures.Option{fixtures.WithReplicas(3)}, 1},
		{"maxUnavailable 50% of 3 rounds up", []fixtures.Option{fixtures.WithReplicas(3), budget(&embedopsv1.DisruptionBudgetSpec{MaxUnavailable: new(intstr.FromString("50%"))})}, 2},
		{"minAvailable 2 of 3", []fixtures.Option{fixtures.WithReplicas(3), budget(&embedopsv1.DisruptionBudgetSpec{MinAvailable: new(intstr.FromInt32(2))})}, 1},
		{"minAvailable 100%", []fixtures.Option{fixtures.WithReplicas(3), budget(&embedopsv1.DisruptionBudgetSpec{MinAvailable: new(intstr.FromString("100%"))})}, 0},
	}
	for _, tc := range cases {
		g.Expect(builder.AllowedUnavailable(fixtures.EmbeddingServer("ns", "s", tc.options...))).To(Equal(tc.want), tc.name)
	}
}
