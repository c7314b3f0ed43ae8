package health

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/kustomize/api/resource"

	"github.com/embedops/embedops/test/healthcheck"
)

// fluxKustomization is the part of a kustomize.toolkit.fluxcd.io/v1
// Kustomization these tests read.
type fluxKustomization struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		DependsOn        []objectMeta       `json:"dependsOn"`
		Path             string             `json:"path"`
		Prune            bool               `json:"prune"`
		Wait             bool               `json:"wait"`
		TargetNamespace  string             `json:"targetNamespace"`
		SourceRef        sourceRef          `json:"sourceRef"`
		HealthCheckExprs []healthcheck.Expr `json:"healthCheckExprs"`
	} `json:"spec"`
}

// gitRepository is the part of a source.toolkit.fluxcd.io/v1 GitRepository
// these tests read.
type gitRepository struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		URL    string `json:"url"`
		Ignore string `json:"ignore"`
	} `json:"spec"`
}

// objectMeta is a name and namespace, also of dependsOn entries.
type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Annotations map[string]string `json:"annotations"`
}

// sourceRef is a Flux Kustomization's spec.sourceRef.
type sourceRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// TestFluxLayout checks both Flux layouts: the operator from config/default
// and from the Helm chart.
func TestFluxLayout(t *testing.T) {
	for _, dir := range []string{"gitops/flux", "gitops/flux-helm"} {
		t.Run(dir, func(t *testing.T) { expectFluxLayout(t, dir) })
	}
}

// expectFluxLayout checks a Flux layout: the operator, then the examples,
// everything rendered from what the GitRepository fetches.
func expectFluxLayout(t *testing.T, dir string) {
	g := NewWithT(t)
	rendered := renderRepo(t, dir)
	kinds := map[string]int{}
	namespaces := map[string]bool{}
	var repo gitRepository
	ks := map[string]fluxKustomization{}
	for _, r := range rendered {
		kinds[r.GetKind()]++
		switch r.GetKind() {
		case "Namespace":
			namespaces[r.GetName()] = true
		case "GitRepository":
			g.Expect(r.GetApiVersion()).To(Equal("source.toolkit.fluxcd.io/v1"))
			repo = as[gitRepository](t, r)
		case "Kustomization":
			g.Expect(r.GetApiVersion()).To(Equal("kustomize.toolkit.fluxcd.io/v1"))
			k := as[fluxKustomization](t, r)
			ks[k.Metadata.Name] = k
		}
	}
	g.Expect(kinds).To(Equal(map[string]int{"Namespace": 1, "GitRepository": 1, "Kustomization": 2}))
	g.Expect(ks).To(HaveKey("embedops-operator"))
	g.Expect(ks).To(HaveKey("embedops-examples"))
	expectPlaceholderURL(g, repo.Spec.URL)
	source := sourceTree(t, repo.Spec.Ignore)

	for name, k := range ks {
		g.Expect(k.Metadata.Namespace).To(Equal(repo.Metadata.Namespace), name)
		g.Expect(k.Spec.SourceRef).To(Equal(sourceRef{Kind: "GitRepository", Name: repo.Metadata.Name}), name)
		g.Expect(k.Spec.Prune).To(BeTrue(), name)
		g.Expect(k.Spec.Wait).To(BeTrue(), name)
		for _, d := range k.Spec.DependsOn {
			g.Expect(ks).To(HaveKey(d.Name), "%s depends on a Kustomization outside the layout", name)
		}
		if k.Spec.TargetNamespace != "" {
			g.Expect(namespaces).To(HaveKey(k.Spec.TargetNamespace), "%s's targetNamespace is not created", name)
		}
	}
	g.Expect(fluxOrder(t, ks)).To(Equal([]string{"embedops-operator", "embedops-examples"}))

	// Each path renders from what the GitRepository fetches.
	operator := fluxInstalls(t, source, repo, renderFS(t, source, ks["embedops-operator"].Spec.Path))
	g.Expect(kindsOfObjects(operator)).To(ContainElements("CustomResourceDefinition", "Deployment"))
	examples := renderFS(t, source, ks["embedops-examples"].Spec.Path)
	g.Expect(kindsOf(examples)).To(ContainElement("EmbeddingServer"))
	for _, r := range examples {
		g.Expect(r.GetNamespace()).To(BeEmpty(), "targetNamespace places the examples")
	}

	// The examples wait with config/flux's expressions, which cover every
	// embedops kind they apply.
	exprs := ks["embedops-examples"].Spec.HealthCheckExprs
	g.Expect(exprs).To(Equal(fluxHealthCheckExprs(t)))
	covered := map[string]bool{}
	for _, e := range exprs {
		covered[e.APIVersion+"/"+e.Kind] = true
	}
	applied := map[string]bool{}
	for _, r := range examples {
		applied[r.GetApiVersion()+"/"+r.GetKind()] = true
		if strings.HasPrefix(r.GetApiVersion(), "embedops.dev/") {
			g.Expect(covered).To(HaveKey(r.GetApiVersion() + "/" + r.GetKind()))
		}
	}
	// kustomize-controller checks the health of what it applied only, so
	// an expression for a kind it never applies is never evaluated.
	for kind := range covered {
		g.Expect(applied).To(HaveKey(kind), "healthCheckExprs for %s, which the Kustomization never applies", kind)
	}
}

// fluxOrder returns the Kustomizations in dependency order, failing on a
// cycle; ties are broken by name.
func fluxOrder(t *testing.T, ks map[string]fluxKustomization) []string {
	t.Helper()
	var order []string
	done := map[string]bool{}
	for len(order) < len(ks) {
		var ready []string
		for name, k := range ks {
			if done[name] {
				continue
			}
			waiting := false
			for _, d := range k.Spec.DependsOn {
				waiting = waiting || !done[d.Name]
			}
			if !waiting {
				ready = append(ready, name)
			}
		}
		if len(ready) == 0 {
			t.Fatalf("dependsOn has a cycle after %v", order)
		}
		slices.Sort(ready)
		for _, name := range ready {
			done[name] = true
		}
		order = append(order, ready...)
	}
	return order
}

// expectPlaceholderURL checks that a git URL names no real host.
func expectPlaceholderURL(g Gomega, raw string) {
	u, err := url.Parse(raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Scheme).To(Equal("https"))
	g.Expect(u.Hostname() == "example.com" || strings.HasSuffix(u.Hostname(), ".example.com")).
		To(BeTrue(), "%s is not a placeholder URL", raw)
}

// kindsOf lists the kinds of rendered resources.
func kindsOf(rs []*resource.Resource) []string {
	kinds := make([]string, 0, len(rs))
	for _, r := range rs {
		kinds = append(kinds, r.GetKind())
	}
	return kinds
}

// TestGitOpsToolsNeverDeleteTheCRDs checks that pruning a Flux
// Kustomization or an Argo CD Application never deletes the CRDs, which
// would delete every server and binding with them.
func TestGitOpsToolsNeverDeleteTheCRDs(t *testing.T) {
	for _, dir := range []string{"config/crd", "config/default"} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			crds := 0
			for _, r := range renderRepo(t, dir) {
				if r.GetKind() != "CustomResourceDefinition" {
					continue
				}
				crds++
				g.Expect(r.GetAnnotations()).To(HaveKeyWithValue("kustomize.toolkit.fluxcd.io/prune", "disabled"), r.GetName())
				g.Expect(r.GetAnnotations()).To(HaveKeyWithValue("argocd.argoproj.io/sync-options", "Prune=false,Delete=false"), r.GetName())
			}
			g.Expect(crds).To(Equal(2))
		})
	}
}
