package decision_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

func TestBindingName(t *testing.T) {
	cases := []struct {
		model, prefix string
	}{
		{"BAAI/bge-small-en-v1.5", "bge-small-en-v1-5"},
		{"sentence-transformers/all-MiniLM-L6-v2", "all-minilm-l6-v2"},
		{"intfloat/e5-large-v2", "e5-large-v2"},
		{"nomic-embed-text-v1", "nomic-embed-text-v1"},
		{"/models/gte/", "gte"},
		{"/models/My_Model..v2", "my-model-v2"},
		{"org/__weird__", "weird"},
		{"org/___", "cache"},
		{"/", "cache"},
		{"org/Ünïcode-Módel", "n-code-m-del"},
		{"Alibaba-NLP/gte-Qwen2-7B-instruct-with-a-very-long-suffix", "gte-qwen2-7b-instruct-with-a-v"},
		{"org/" + strings.Repeat("a", 29) + "-b", strings.Repeat("a", 29)},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			g := NewWithT(t)
			d := mustDecide(g, server(withModel(tc.model)))
			name := decision.BindingName(d)
			key := strings.TrimPrefix(d.Identity.Key, "sha256:")[:10]
			digest := strings.TrimPrefix(d.Decision.Digest, "sha256:")[:10]
			g.Expect(name).To(Equal(tc.prefix + "-" + key + "-" + digest))
			g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty())
			g.Expect(validation.IsDNS1123Label(name)).To(BeEmpty())
			g.Expect(len(name)).To(BeNumerically("<=", 52))
			g.Expect(decision.BindingName(mustDecide(g, server(withModel(tc.model))))).To(Equal(name), "not deterministic")
		})
	}
}

func TestBindingNameFollowsTheDecision(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*embedopsv1.EmbeddingServer)
		same bool
	}{
		{"defaults filled", withDefaults, true},
		{"size in another suffix", withSize("10240Mi"), true},
		{"another size", withSize("20Gi"), false},
		{"another storage class", withStorageClass("fast"), false},
		{"another revision", withRevision("v2"), false},
		{"another server", withName("other"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			base := decision.BindingName(mustDecide(g, server()))
			name := decision.BindingName(mustDecide(g, server(tc.mod)))
			if tc.same {
				g.Expect(name).To(Equal(base))
			} else {
				g.Expect(name).NotTo(Equal(base))
			}
		})
	}
}

func TestClaimTemplateName(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server())
	name := decision.ClaimTemplateName(d)
	g.Expect(name).To(Equal("cache-" + strings.TrimPrefix(d.Decision.Digest, "sha256:")[:10]))
	g.Expect(validation.IsDNS1123Label(name)).To(BeEmpty())
	g.Expect(decision.ClaimTemplateName(mustDecide(g, server(withRetainFor(1))))).NotTo(Equal(name))
	g.Expect(decision.ClaimTemplateName(mustDecide(g, server(withDefaults)))).To(Equal(name))
}
