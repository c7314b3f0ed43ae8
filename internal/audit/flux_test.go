package audit

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// fluxServer is a server with post-build variables: the size has a
// default, the class has none.
const fluxServer = `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: search
spec:
  model:
    name: BAAI/bge-small-en-v1.5
  replicas: 1
  cache:
    storageClassName: ${CLASS}
    size: ${SIZE:=5Gi}
`

// fluxSpec is a Kustomization's render-relevant spec with every setting
// the render must honour.
const fluxSpec = `{"path":"./apps","targetNamespace":"team","namePrefix":"eu-","nameSuffix":"-1",
"components":["../components/big"],
"commonMetadata":{"labels":{"team":"search"}},
"images":[{"name":"ghcr.io/huggingface/text-embeddings-inference","newTag":"cpu-1.9"}],
"patches":[{"patch":"- op: replace\n  path: /spec/cache/retainFor\n  value: 2h\n","target":{"kind":"EmbeddingServer"}}],
"postBuild":{"substitute":{"CLASS":"fast"}}}`

// fluxRepository commits apps/ (no kustomization: kustomize-controller
// generates one) and a component that doubles the replicas.
func fluxRepository(t *testing.T) (commit string, repo *gitops) {
	h := newHistory(t)
	commit = h.commit("Serve search with Flux",
		write("apps/server.yaml", fluxServer),
		write("components/big/kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n- patch: |\n    - op: replace\n      path: /spec/replicas\n      value: 2\n  target:\n    kind: EmbeddingServer\n"))
	repo = &gitops{}
	repo.dir, repo.repo = h.save()
	return commit, repo
}

// fluxRendered is the server kustomize-controller applies from fluxSpec.
func fluxRendered() *embedopsv1.EmbeddingServer {
	size := resource.MustParse("5Gi")
	return &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Name: "eu-search-1", Namespace: "team"},
		Spec: embedopsv1.EmbeddingServerSpec{
			Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"},
			Cache: embedopsv1.CacheSpec{StorageClassName: "fast", Size: &size, RetainFor: &metav1.Duration{Duration: 2 * 3600e9}},
		},
	}
}

// withFlux records the Kustomization and its spec.
func withFlux(spec string, from ...embedopsv1.SubstitutionSource) bindingOption {
	return withSource(func(s *embedopsv1.DecisionSource) {
		s.Path = "./apps"
		s.ObjectRef = &embedopsv1.SourceObjectReference{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "flux-system", Name: "apps"}
		s.Render = &embedopsv1.RenderInputs{Spec: spec, SubstituteFrom: from}
	})
}

func TestAuditRendersAsKustomizeController(t *testing.T) {
	g := NewWithT(t)
	commit, repo := fluxRepository(t)
	binding := bindingFor(t, fluxRendered(), commit, withFlux(fluxSpec))
	res := Audit(context.Background(), repo.repo, binding, Options{})
	g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
	g.Expect(res.Server).To(Equal("team/eu-search-1"))
	g.Expect(res.OriginCommit).To(Equal(commit))
}

func TestAuditNeedsTheRecordedKustomizationSettings(t *testing.T) {
	g := NewWithT(t)
	commit, repo := fluxRepository(t)
	binding := bindingFor(t, fluxRendered(), commit, withFlux(fluxSpec))
	binding.Spec.Source.Render = nil
	res := Audit(context.Background(), repo.repo, binding, Options{})
	g.Expect(res.Result).NotTo(Equal(Verified), "without the settings the plain build has no such server")
}

func TestAuditRefusesWhatItCannotReproduce(t *testing.T) {
	cases := []struct {
		name   string
		option bindingOption
		reason string
	}{
		{"a Secret substitution", withFlux(fluxSpec, embedopsv1.SubstitutionSource{Kind: "Secret", Name: "vars", ResourceVersion: "42"}),
			"Secret/vars (resourceVersion 42)"},
		{"an unknown field", withFlux(`{"path":"./apps","decryption":{"provider":"sops"}}`), "spec.decryption is not reproduced"},
		{"a chart", withSource(func(s *embedopsv1.DecisionSource) { s.Chart = "bge"; s.Commit = "" }), "not a git source"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			commit, repo := fluxRepository(t)
			res := Audit(context.Background(), repo.repo, bindingFor(t, fluxRendered(), commit, tc.option), Options{})
			g.Expect(res.Result).To(Equal(Unverifiable))
			g.Expect(res.Reason).To(ContainSubstring(tc.reason))
		})
	}
}

func TestAuditSkipsAnAbsentOptionalSubstitution(t *testing.T) {
	g := NewWithT(t)
	commit, repo := fluxRepository(t)
	binding := bindingFor(t, fluxRendered(), commit, withFlux(fluxSpec, embedopsv1.SubstitutionSource{Kind: "ConfigMap", Name: "vars", Optional: true}))
	res := Audit(context.Background(), repo.repo, binding, Options{})
	g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
}

// FuzzFluxRecipe checks that any recorded Kustomization spec is either
// refused with a reason or accepted with only the fields the recipe
// reproduces, never a panic.
func FuzzFluxRecipe(f *testing.F) {
	for _, seed := range []string{fluxSpec, `{"decryption":{}}`, `[]`, `{"postBuild":7}`, `null`, ``} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		rc, reason := fluxRecipeFor(&embedopsv1.RenderInputs{Spec: spec})
		if (rc == nil) == (reason == "") {
			t.Fatalf("spec %q gave recipe %v and reason %q", spec, rc, reason)
		}
		if rc == nil {
			return
		}
		for field := range rc.(flux).spec {
			if !slices.Contains(fluxRenderFields, field) {
				t.Fatalf("spec %q accepted with field %s", spec, field)
			}
		}
	})
}
