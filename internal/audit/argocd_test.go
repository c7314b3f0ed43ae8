package audit

import (
	"context"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// argoServer is a server file of size and class, named name.
func argoServer(name, size string) string {
	return `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: ` + name + `
spec:
  model:
    name: BAAI/bge-small-en-v1.5
  cache:
    storageClassName: fast
    size: ` + size + "\n"
}

// argoRendered is the server an Application applies into namespace.
func argoRendered(namespace, name, size string) *embedopsv1.EmbeddingServer {
	quantity := resource.MustParse(size)
	return &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: embedopsv1.EmbeddingServerSpec{
			Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"},
			Cache: embedopsv1.CacheSpec{StorageClassName: "fast", Size: &quantity},
		},
	}
}

// The Helm chart committed under charts/bge: its size, class and name come
// from values, the release and its namespace.
const (
	chartYAML    = "apiVersion: v2\nname: bge\nversion: 0.1.0\n"
	chartValues  = "cache:\n  size: 1Gi\n  class: standard\n"
	chartIgnore  = "notes/\n"
	chartServer  = "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata:\n  name: {{ .Release.Name }}-bge\n  namespace: {{ .Release.Namespace }}\nspec:\n  model:\n    name: BAAI/bge-small-en-v1.5\n  cache:\n    storageClassName: {{ .Values.cache.class }}\n    size: {{ .Values.cache.size }}\n"
	brokenServer = "{{ fail \"this chart refuses to render\" }}\n"
)

// argoRepository commits a directory, a kustomize overlay and a chart.
func argoRepository(t *testing.T, extra ...change) (string, *gitops) {
	h := newHistory(t)
	changes := append([]change{
		write("plain/server.yaml", argoServer("plain", "3Gi")),
		write("plain/skip-me.yaml", argoServer("skipped", "9Gi")),
		write("plain/nested/deep.yaml", argoServer("deep", "4Gi")),
		write("plain/notes.txt", "not a manifest\n"),
		write("base/kustomization.yaml", baseKustomization),
		write("base/embeddingserver.yaml", argoServer("search", "2Gi")),
		write("charts/bge/Chart.yaml", chartYAML),
		write("charts/bge/values.yaml", chartValues),
		write("charts/bge/.helmignore", chartIgnore),
		write("charts/bge/templates/server.yaml", chartServer),
		write("charts/bge/values-prod.yaml", "cache:\n  class: fast\n"),
		write("charts/gated/Chart.yaml", "apiVersion: v2\nname: gated\nversion: 0.1.0\nkubeVersion: \">=1.34.0-0\"\n"),
		write("charts/gated/values.yaml", chartValues),
		write("charts/gated/templates/server.yaml", chartServer),
		write("env/prod.yaml", "cache:\n  size: 7Gi\n"),
	}, extra...)
	commit := h.commit("Serve search with Argo CD", changes...)
	repo := &gitops{}
	repo.dir, repo.repo = h.save()
	return commit, repo
}

// withArgo records an Application named models syncing path.
func withArgo(path, spec string, revisions ...string) bindingOption {
	return withSource(func(s *embedopsv1.DecisionSource) {
		s.Method, s.Revision, s.Path = embedopsv1.SourceArgoCD, s.Commit, path
		s.ObjectRef = &embedopsv1.SourceObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Namespace: "argocd", Name: "models"}
		s.Render = &embedopsv1.RenderInputs{Spec: spec, Revisions: revisions}
	})
}

func TestAuditRendersArgoCDSources(t *testing.T) {
	const repoURL = "https://git.example.com/fleet.git"
	cases := []struct {
		name, path, spec string
		server           *embedopsv1.EmbeddingServer
		multi            bool
	}{
		{"directory", "plain", `{"source":{"repoURL":"` + repoURL + `","path":"plain"},"destination":{"namespace":"apps"}}`,
			argoRendered("apps", "plain", "3Gi"), false},
		{"directory recursing with include and exclude", "plain",
			`{"source":{"repoURL":"` + repoURL + `","path":"plain","directory":{"recurse":true,"exclude":"*skip*","include":"{*.yaml,nested/*}"}},"destination":{"namespace":"apps"}}`,
			argoRendered("apps", "deep", "4Gi"), false},
		{"kustomize overrides", "base",
			`{"source":{"repoURL":"` + repoURL + `","path":"base","kustomize":{"namePrefix":"eu-","namespace":"models","commonLabels":{"team":"a"},` +
				`"images":["tei=ghcr.io/huggingface/text-embeddings-inference:cpu-1.9"],` +
				`"patches":[{"target":{"kind":"EmbeddingServer"},"patch":"- op: replace\n  path: /spec/cache/size\n  value: 6Gi\n"}]}},"destination":{"namespace":"apps"}}`,
			argoRendered("models", "eu-search", "6Gi"), false},
		{"helm from a git path", "charts/bge",
			`{"source":{"repoURL":"` + repoURL + `","path":"charts/bge","helm":{"releaseName":"prod","valueFiles":["values-prod.yaml"],` +
				`"values":"cache:\n  size: 5Gi\n","parameters":[{"name":"cache.size","value":"8Gi"}]}},"destination":{"namespace":"apps"}}`,
			argoRendered("apps", "prod-bge", "8Gi"), false},
		{"helm chart that requires the supported Kubernetes", "charts/gated",
			`{"source":{"repoURL":"` + repoURL + `","path":"charts/gated"},"destination":{"namespace":"apps"}}`,
			withClass(argoRendered("apps", "models-bge", "1Gi"), "standard"), false},
		{"helm valuesObject over values", "charts/bge",
			`{"source":{"repoURL":"` + repoURL + `","path":"charts/bge","helm":{"values":"cache:\n  size: 5Gi\n","valuesObject":{"cache":{"size":"6Gi","class":"fast"}}}},"destination":{"namespace":"apps"}}`,
			argoRendered("apps", "models-bge", "6Gi"), false},
		{"multi-source with $values", "charts/bge",
			`{"sources":[{"repoURL":"` + repoURL + `","path":"charts/bge","helm":{"valueFiles":["values-prod.yaml","$values/env/prod.yaml"]}},` +
				`{"repoURL":"` + repoURL + `","ref":"values"}],"destination":{"namespace":"apps"}}`,
			argoRendered("apps", "models-bge", "7Gi"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			commit, repo := argoRepository(t)
			var revisions []string
			if tc.multi {
				revisions = []string{commit, commit}
			}
			binding := bindingFor(t, tc.server, commit, withArgo(tc.path, tc.spec, revisions...))
			res := Audit(context.Background(), repo.repo, binding, Options{})
			g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
			g.Expect(res.Server).To(Equal(tc.server.Namespace + "/" + tc.server.Name))
		})
	}
}

func TestAuditOfArgoCDSourcesNeverGuesses(t *testing.T) {
	const repoURL = "https://git.example.com/fleet.git"
	cases := []struct {
		name, path, spec, reason string
		extra                    []change
	}{
		{"a missing value file", "charts/bge",
			`{"source":{"repoURL":"` + repoURL + `","path":"charts/bge","helm":{"valueFiles":["values-staging.yaml"]}},"destination":{"namespace":"apps"}}`,
			"values-staging.yaml is missing", nil},
		{"a chart that fails to render", "charts/bge",
			`{"source":{"repoURL":"` + repoURL + `","path":"charts/bge"},"destination":{"namespace":"apps"}}`,
			"this chart refuses to render", []change{write("charts/bge/templates/broken.yaml", brokenServer)}},
		{"an unknown field", "charts/bge",
			`{"source":{"repoURL":"` + repoURL + `","path":"charts/bge","helm":{"valueFile":["x.yaml"]}},"destination":{"namespace":"apps"}}`,
			"unknown field", nil},
		{"a plugin", "plain",
			`{"source":{"repoURL":"` + repoURL + `","path":"plain","plugin":{"name":"cmp"}},"destination":{"namespace":"apps"}}`,
			"config management plugin", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			commit, repo := argoRepository(t, tc.extra...)
			binding := bindingFor(t, argoRendered("apps", "models-bge", "1Gi"), commit, withArgo(tc.path, tc.spec))
			res := Audit(context.Background(), repo.repo, binding, Options{})
			g.Expect(res.Result).To(Equal(Unverifiable))
			g.Expect(res.Reason).To(ContainSubstring(tc.reason))
		})
	}
}

// TestAuditOfArgoCDNonGitSourcesClonesNothing audits bindings recorded as
// internal/provenance records an Application whose source is a Helm chart
// repository or an OCI registry: Unverifiable, not a git source, and no
// clone is tried.
func TestAuditOfArgoCDNonGitSourcesClonesNothing(t *testing.T) {
	cases := []struct {
		name, repository, chart, revision, spec, reason string
		// commit is what an older controller may have recorded.
		commit string
	}{
		{"a Helm chart repository", "https://charts.example.com", "tei", "1.2.0",
			`{"source":{"repoURL":"https://charts.example.com","chart":"tei","targetRevision":"1.2.*"},"destination":{"namespace":"apps"}}`,
			"not a git source: chart tei 1.2.0 from https://charts.example.com", ""},
		{"a Helm chart from an OCI registry", "registry.example.com/charts", "tei", "1.2.0",
			`{"source":{"repoURL":"registry.example.com/charts","chart":"tei","targetRevision":"1.2.0"},"destination":{"namespace":"apps"}}`,
			"not a git source: chart tei 1.2.0 from registry.example.com/charts", ""},
		{"an OCI source", "oci://registry.example.com/fleet", "", "sha256:" + strings.Repeat("ab", 32),
			`{"source":{"repoURL":"oci://registry.example.com/fleet","path":".","targetRevision":"1.0.0"},"destination":{"namespace":"apps"}}`,
			"not a git source: OCI artifact oci://registry.example.com/fleet sha256:abab", ""},
		{"an OCI source whose revision looks like a commit", "OCI://registry.example.com/fleet", "", strings.Repeat("c", 40),
			`{"source":{"repoURL":"OCI://registry.example.com/fleet","path":"."},"destination":{"namespace":"apps"}}`,
			"not a git source: OCI artifact OCI://registry.example.com/fleet cccc", strings.Repeat("c", 40)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			binding := bindingFor(t, argoRendered("apps", "models-bge", "1Gi"), strings.Repeat("c", 40), withArgo(".", tc.spec),
				withSource(func(s *embedopsv1.DecisionSource) {
					s.Repository, s.Chart, s.Revision, s.Path, s.Commit = tc.repository, tc.chart, tc.revision, "", tc.commit
				}))
			cache := t.TempDir()
			results := All(context.Background(), RepositoryOptions{CacheDir: cache}, []embedopsv1.ModelCacheBinding{*binding}, Options{})
			g.Expect(results).To(ConsistOf(And(HaveField("Result", Unverifiable), HaveField("Reason", ContainSubstring(tc.reason)))))
			g.Expect(os.ReadDir(cache)).To(BeEmpty(), "nothing is cloned")
		})
	}
}

// withClass is server with its cache on class.
func withClass(server *embedopsv1.EmbeddingServer, class string) *embedopsv1.EmbeddingServer {
	server.Spec.Cache.StorageClassName = class
	return server
}
