package health

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
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
			RepoURL        string    `json:"repoURL"`
			TargetRevision string    `json:"targetRevision"`
			Path           string    `json:"path"`
			Helm           *argoHelm `json:"helm"`
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

// argoLayout is an Argo CD layout: its directory, the Applications it
// holds, and which of them syncs the CRDs.
type argoLayout struct {
	dir     string
	apps    []string
	crdsApp string
}

// TestArgoCDLayout checks both Argo CD layouts: the CRDs and config/default
// in two Applications, and the Helm chart in one.
func TestArgoCDLayout(t *testing.T) {
	for _, layout := range []argoLayout{
		{dir: "gitops/argocd", apps: []string{"embedops-crds", "embedops-operator", "embedops-examples"}, crdsApp: "embedops-crds"},
		{dir: "gitops/argocd-helm", apps: []string{"embedops-operator", "embedops-examples"}, crdsApp: "embedops-operator"},
	} {
		t.Run(layout.dir, func(t *testing.T) { expectArgoCDLayout(t, layout) })
	}
}

// expectArgoCDLayout checks an Argo CD layout: its app of apps, the waves,
// and what each Application syncs.
func expectArgoCDLayout(t *testing.T, layout argoLayout) {
	g := NewWithT(t)
	apps := map[string]argoApplication{}
	for _, r := range renderRepo(t, layout.dir) {
		g.Expect(r.GetApiVersion()).To(Equal("argoproj.io/v1alpha1"))
		g.Expect(r.GetKind()).To(Equal("Application"))
		apps[r.GetName()] = as[argoApplication](t, r)
	}
	g.Expect(slices.Collect(maps.Keys(apps))).To(ConsistOf(layout.apps))
	crds, operator, examples := apps[layout.crdsApp], apps["embedops-operator"], apps["embedops-examples"]
	g.Expect(examples.Spec.Source.Path).To(Equal("examples"))
	g.Expect(crds.wave(g)).To(BeNumerically("<=", operator.wave(g)))
	g.Expect(operator.wave(g)).To(BeNumerically("<", examples.wave(g)))

	root := appFile(t, filepath.Join(repoRoot, layout.dir, "root-app.yaml"))
	g.Expect(root.Spec.Source.Path).To(Equal(layout.dir), "the app of apps syncs this layout")
	g.Expect(root.Spec.SyncPolicy.Automated).NotTo(BeNil())
	expectPlaceholderURL(g, root.Spec.Source.RepoURL)

	// Who renders what: CRDs only in their Application, the controller,
	// custom resources after their CRDs; no object in two Applications
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
		for _, o := range argoInstalls(t, source, app) {
			id := o.Key()
			g.Expect(owner).NotTo(HaveKey(id), "%s is in %s and %s", id, owner[id], name)
			owner[id] = name
			kinds[name] = append(kinds[name], o.Kind())
			if o.Kind() == "CustomResourceDefinition" {
				spec := o["spec"].(map[string]any)
				crdWave[fmt.Sprint(spec["group"], "/", spec["names"].(map[string]any)["kind"])] = app.wave(g)
				g.Expect(o["metadata"]).To(HaveKeyWithValue("annotations",
					HaveKeyWithValue("argocd.argoproj.io/sync-options", "Prune=false,Delete=false")), "Argo CD may delete %s", id)
			}
			if o.Group() == "embedops.dev" {
				custom = append(custom, customResource{app: name, groupKind: "embedops.dev/" + o.Kind()})
			}
		}
	}
	if layout.crdsApp != "embedops-operator" {
		g.Expect(crds.Spec.Source.Path).To(Equal("config/crd"))
		g.Expect(kinds[layout.crdsApp]).To(HaveEach("CustomResourceDefinition"))
		g.Expect(kinds["embedops-operator"]).NotTo(ContainElement("CustomResourceDefinition"))
	}
	g.Expect(kinds["embedops-operator"]).To(ContainElement("Deployment"))
	g.Expect(crdWave).To(HaveLen(2))
	g.Expect(custom).NotTo(BeEmpty())
	for _, cr := range custom {
		app := apps[cr.app]
		g.Expect(crdWave).To(HaveKey(cr.groupKind))
		g.Expect(app.wave(g)).To(BeNumerically(">", crdWave[cr.groupKind]), "%s syncs %s before its CRD", cr.app, cr.groupKind)
		g.Expect(app.Spec.SyncPolicy.SyncOptions).To(ContainElement("SkipDryRunOnMissingResource=true"),
			"%s's dry run fails while the %s CRD is missing", cr.app, cr.groupKind)
	}
	expectHealthChecksSynced(g, custom)

	// The CRDs are too large for client-side apply's annotation.
	g.Expect(crds.Spec.SyncPolicy.SyncOptions).To(ContainElement("ServerSideApply=true"))
	g.Expect(examples.Spec.SyncPolicy.SyncOptions).To(ContainElement("CreateNamespace=true"))
	g.Expect(examples.Spec.Destination.Namespace).NotTo(BeEmpty())
}

// expectHealthChecksSynced: Argo CD shows, and so checks the health of,
// what an Application syncs and the children those own, so a health check
// for another kind is never run.
func expectHealthChecksSynced(g Gomega, custom []customResource) {
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
