package health

import (
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
)

// argoApplication is the part of an argoproj.io/v1alpha1 Application these
// tests read.
type argoApplication struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Project string `json:"project"`
		Source  struct {
			RepoURL        string `json:"repoURL"`
			TargetRevision string `json:"targetRevision"`
			Path           string `json:"path"`
		} `json:"source"`
		Destination struct {
			Server    string `json:"server"`
			Namespace string `json:"namespace"`
		} `json:"destination"`
		SyncPolicy struct {
			Automated *struct {
				Prune    bool `json:"prune"`
				SelfHeal bool `json:"selfHeal"`
			} `json:"automated"`
			SyncOptions []string `json:"syncOptions"`
		} `json:"syncPolicy"`
	} `json:"spec"`
}

// wave is an Application's sync wave; Argo CD's default is 0.
func (a argoApplication) wave(g Gomega) int {
	w, ok := a.Metadata.Annotations["argocd.argoproj.io/sync-wave"]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(w)
	g.Expect(err).NotTo(HaveOccurred(), "%s's sync wave", a.Metadata.Name)
	return n
}

func TestArgoCDLayout(t *testing.T) {
	g := NewWithT(t)
	apps := map[string]argoApplication{}
	for _, r := range renderRepo(t, "gitops/argocd") {
		g.Expect(r.GetApiVersion()).To(Equal("argoproj.io/v1alpha1"))
		g.Expect(r.GetKind()).To(Equal("Application"))
		apps[r.GetName()] = as[argoApplication](t, r)
	}
	g.Expect(apps).To(HaveLen(3))
	crds, operator, examples := apps["embedops-crds"], apps["embedops-operator"], apps["embedops-examples"]
	g.Expect(crds.Spec.Source.Path).To(Equal("config/crd"))
	g.Expect(examples.Spec.Source.Path).To(Equal("examples"))
	g.Expect(crds.wave(g)).To(BeNumerically("<", operator.wave(g)))
	g.Expect(operator.wave(g)).To(BeNumerically("<", examples.wave(g)))

	root := appFile(t, filepath.Join(repoRoot, "gitops", "argocd", "root-app.yaml"))
	g.Expect(root.Spec.Source.Path).To(Equal("gitops/argocd"), "the app of apps syncs this layout")
	g.Expect(root.Spec.SyncPolicy.Automated).NotTo(BeNil())
	expectPlaceholderURL(g, root.Spec.Source.RepoURL)

	// Who renders what: CRDs only in the first wave, the controller without
	// them, custom resources after their CRDs; no object in two Applications
	// (Argo CD would report it as shared and both would fight over it).
	source := sourceTree(t, "")
	owner := map[string]string{}
	kinds := map[string][]string{}
	crdWave := map[string]int{}
	var custom []customResource
	for name, app := range apps {
		g.Expect(app.Metadata.Namespace).To(Equal("argocd"), name)
		g.Expect(app.Spec.Project).To(Equal("default"), name)
		g.Expect(app.Spec.Source.RepoURL).To(Equal(root.Spec.Source.RepoURL), name)
		g.Expect(app.Spec.Source.TargetRevision).To(Equal(root.Spec.Source.TargetRevision), name)
		g.Expect(app.Spec.Destination.Server).NotTo(BeEmpty(), name)
		g.Expect(app.Spec.SyncPolicy.Automated).NotTo(BeNil(), name)
		g.Expect(app.Spec.SyncPolicy.Automated.Prune).To(BeTrue(), name)
		g.Expect(app.Spec.SyncPolicy.Automated.SelfHeal).To(BeTrue(), name)
		for _, r := range renderFS(t, source, app.Spec.Source.Path) {
			id := r.CurId().String()
			g.Expect(owner).NotTo(HaveKey(id), "%s is in %s and %s", id, owner[id], name)
			owner[id] = name
			kinds[name] = append(kinds[name], r.GetKind())
			if r.GetKind() == "CustomResourceDefinition" {
				crd := as[struct {
					Spec struct {
						Group string `json:"group"`
						Names struct {
							Kind string `json:"kind"`
						} `json:"names"`
					} `json:"spec"`
				}](t, r)
				crdWave[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = app.wave(g)
			}
			if r.GetGvk().Group == "embedops.dev" {
				custom = append(custom, customResource{app: name, groupKind: "embedops.dev/" + r.GetKind()})
			}
		}
	}
	g.Expect(kinds["embedops-crds"]).To(HaveEach("CustomResourceDefinition"))
	g.Expect(kinds["embedops-operator"]).To(ContainElement("Deployment"))
	g.Expect(kinds["embedops-operator"]).NotTo(ContainElement("CustomResourceDefinition"))
	g.Expect(crdWave).To(HaveLen(2))
	g.Expect(custom).NotTo(BeEmpty())
	for _, cr := range custom {
		app := apps[cr.app]
		g.Expect(crdWave).To(HaveKey(cr.groupKind))
		g.Expect(app.wave(g)).To(BeNumerically(">", crdWave[cr.groupKind]), "%s syncs %s before its CRD", cr.app, cr.groupKind)
		g.Expect(app.Spec.SyncPolicy.SyncOptions).To(ContainElement("SkipDryRunOnMissingResource=true"),
			"%s's dry run fails while the %s CRD is missing", cr.app, cr.groupKind)
	}

	// Argo CD shows, and so checks the health of, what an Application
	// syncs and the children those own: a health check for another kind
	// is never run.
	synced := map[string]bool{}
	for _, cr := range custom {
		synced[cr.groupKind] = true
	}
	scripts, err := filepath.Glob(filepath.Join(customizationsDir, "*", "*", "health.lua"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(scripts).NotTo(BeEmpty())
	for _, script := range scripts {
		kind, err := filepath.Rel(customizationsDir, filepath.Dir(script))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(synced).To(HaveKey(filepath.ToSlash(kind)), "a health check for %s, which no Application syncs", kind)
	}

	g.Expect(crds.Spec.SyncPolicy.SyncOptions).To(ContainElement("ServerSideApply=true"))
	g.Expect(examples.Spec.SyncPolicy.SyncOptions).To(ContainElement("CreateNamespace=true"))
	g.Expect(examples.Spec.Destination.Namespace).NotTo(BeEmpty())
}

// customResource is an embedops object an Application syncs.
type customResource struct {
	app, groupKind string
}

// appFile reads an Application manifest that no kustomization lists.
func appFile(t *testing.T, path string) argoApplication {
	t.Helper()
	var app argoApplication
	readYAML(t, path, &app)
	return app
}
