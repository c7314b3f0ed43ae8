package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

func TestLabels(t *testing.T) {
	cases := []struct {
		name         string
		server       *embedopsv1.EmbeddingServer
		wantSelector map[string]string
		wantLabels   map[string]string
	}{
		{
			name:   "selector and owner labels",
			server: server("minimal"),
			wantSelector: map[string]string{
				"app.kubernetes.io/name":       "text-embeddings-inference",
				"app.kubernetes.io/instance":   "minimal",
				"app.kubernetes.io/managed-by": "embedops",
			},
			wantLabels: map[string]string{
				"app.kubernetes.io/name":       "text-embeddings-inference",
				"app.kubernetes.io/instance":   "minimal",
				"app.kubernetes.io/managed-by": "embedops",
				"embedops.dev/name":            "minimal",
				"embedops.dev/namespace":       "models",
			},
		},
		{
			name: "the server's own labels are not copied",
			server: server("s", func(s *embedopsv1.EmbeddingServer) {
				s.Namespace = "team-a"
				s.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps"}
			}),
			wantSelector: map[string]string{
				"app.kubernetes.io/name":       "text-embeddings-inference",
				"app.kubernetes.io/instance":   "s",
				"app.kubernetes.io/managed-by": "embedops",
			},
			wantLabels: map[string]string{
				"app.kubernetes.io/name":       "text-embeddings-inference",
				"app.kubernetes.io/instance":   "s",
				"app.kubernetes.io/managed-by": "embedops",
				"embedops.dev/name":            "s",
				"embedops.dev/namespace":       "team-a",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(builder.SelectorLabels(tc.server)).To(Equal(tc.wantSelector))
			g.Expect(builder.Labels(tc.server)).To(Equal(tc.wantLabels))
			g.Expect(builder.Labels(tc.server)).To(HaveKeyWithValue(embedopsv1.NameLabel, tc.server.Name))
			g.Expect(builder.Labels(tc.server)).To(HaveKeyWithValue(embedopsv1.NamespaceLabel, tc.server.Namespace))
		})
	}
}

func TestLabelsReturnsFreshMaps(t *testing.T) {
	g := NewWithT(t)
	s := server("s")
	builder.Labels(s)["x"] = "y"
	builder.SelectorLabels(s)["x"] = "y"
	g.Expect(builder.Labels(s)).NotTo(HaveKey("x"))
	g.Expect(builder.SelectorLabels(s)).NotTo(HaveKey("x"))
}

func TestEveryChildCarriesTheLabels(t *testing.T) {
	g := NewWithT(t)
	s := server("s")
	sts, err := builder.StatefulSet(s, perReplicaCache("cache-1", "", "10Gi"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	want := builder.Labels(s)
	g.Expect(sts.Labels).To(Equal(want))
	g.Expect(sts.Spec.Template.Labels).To(Equal(want))
	g.Expect(sts.Spec.VolumeClaimTemplates[0].Labels).To(Equal(claimLabels(s, "")), "claims have no owner reference: no tracking label")
	g.Expect(builder.Service(s).Labels).To(Equal(want))
	g.Expect(builder.HeadlessService(s).Labels).To(Equal(want))
}
