package health

import (
	"cmp"
	"path"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/embedops/embedops/test/chart"
)

// helmRelease is the part of a helm.toolkit.fluxcd.io/v2 HelmRelease these
// tests read.
type helmRelease struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		ReleaseName     string `json:"releaseName"`
		TargetNamespace string `json:"targetNamespace"`
		Chart           struct {
			Spec struct {
				Chart             string    `json:"chart"`
				SourceRef         sourceRef `json:"sourceRef"`
				ReconcileStrategy string    `json:"reconcileStrategy"`
			} `json:"spec"`
		} `json:"chart"`
		Install    takeOwnership  `json:"install"`
		Upgrade    takeOwnership  `json:"upgrade"`
		Values     map[string]any `json:"values"`
		ValuesFrom []any          `json:"valuesFrom"`
	} `json:"spec"`
}

// takeOwnership is the part of a HelmRelease's install or upgrade these
// tests read.
type takeOwnership struct {
	CRDs                 string `json:"crds"`
	DisableTakeOwnership bool   `json:"disableTakeOwnership"`
}

// argoHelm is the part of an Application's spec.source.helm these tests
// read.
type argoHelm struct {
	ReleaseName  string         `json:"releaseName"`
	ValuesObject map[string]any `json:"valuesObject"`
	SkipCrds     bool           `json:"skipCrds"`
	Values       string         `json:"values"`
	ValueFiles   []string       `json:"valueFiles"`
	Parameters   []any          `json:"parameters"`
}

// fluxInstalls is what applying rs installs: each object itself, and for
// a HelmRelease the objects of its chart, rendered from the GitRepository's
// source as helm-controller does.
func fluxInstalls(t *testing.T, source filesys.FileSystem, repo gitRepository, rs []*resource.Resource) []chart.Object {
	t.Helper()
	var out []chart.Object
	for _, r := range rs {
		if r.GetKind() != "HelmRelease" {
			out = append(out, objectOf(t, r))
			continue
		}
		NewWithT(t).Expect(r.GetApiVersion()).To(Equal("helm.toolkit.fluxcd.io/v2"))
		out = append(out, helmReleaseObjects(t, source, repo, as[helmRelease](t, r))...)
	}
	return out
}

// helmReleaseObjects renders a HelmRelease's chart from the source, checks
// that it installs what config/default installs, and returns the objects.
func helmReleaseObjects(t *testing.T, source filesys.FileSystem, repo gitRepository, hr helmRelease) []chart.Object {
	t.Helper()
	g := NewWithT(t)
	spec := hr.Spec.Chart.Spec
	g.Expect(spec.SourceRef).To(Equal(sourceRef{Kind: "GitRepository", Name: repo.Metadata.Name}))
	g.Expect(spec.ReconcileStrategy).To(Equal("Revision"), "the chart's version does not change with each commit")
	// The chart's CRDs are templates, which the crds policies (for crds/)
	// do not touch; helm-controller adopts those an earlier chart
	// installed from crds/ unless told not to take ownership.
	for _, action := range []takeOwnership{hr.Spec.Install, hr.Spec.Upgrade} {
		g.Expect(action.CRDs).To(BeEmpty(), "the chart has no crds/")
		g.Expect(action.DisableTakeOwnership).To(BeFalse(), "the upgrade from a chart with crds/ adopts its CRDs")
	}
	g.Expect(hr.Spec.ValuesFrom).To(BeEmpty(), "valuesFrom is not rendered by this test")
	// helm-controller's defaults (api/v2 HelmRelease GetReleaseName,
	// GetReleaseNamespace).
	namespace := cmp.Or(hr.Spec.TargetNamespace, hr.Metadata.Namespace)
	name := hr.Spec.ReleaseName
	if name == "" {
		name = strings.TrimPrefix(hr.Spec.TargetNamespace+"-"+hr.Metadata.Name, "-")
	}
	objects := renderChart(t, source, strings.TrimPrefix(path.Clean(spec.Chart), "/"),
		chart.Release{Name: name, Namespace: namespace, Values: hr.Spec.Values})
	expectConfigDefault(t, objects)
	return objects
}

// argoInstalls is what an Application syncs: `helm template` where its
// path holds a chart (Argo CD's rule), with its release name (the
// Application's by default), destination namespace and values, CRDs
// included unless skipped, and then all that config/default installs;
// otherwise the kustomize rendering.
func argoInstalls(t *testing.T, source filesys.FileSystem, app argoApplication) []chart.Object {
	t.Helper()
	dir := app.Spec.Source.Path
	if !source.Exists(path.Join(dir, "Chart.yaml")) {
		var out []chart.Object
		for _, r := range renderFS(t, source, dir) {
			out = append(out, objectOf(t, r))
		}
		return out
	}
	h := argoHelm{}
	if app.Spec.Source.Helm != nil {
		h = *app.Spec.Source.Helm
	}
	g := NewWithT(t)
	g.Expect(h.Values == "" && h.ValueFiles == nil && h.Parameters == nil).To(BeTrue(),
		"%s: only helm.valuesObject is rendered by this test", app.Metadata.Name)
	objects := renderChart(t, source, dir, chart.Release{
		Name:      cmp.Or(h.ReleaseName, app.Metadata.Name),
		Namespace: app.Spec.Destination.Namespace,
		Values:    h.ValuesObject,
	})
	g.Expect(h.SkipCrds).To(BeFalse(), "%s: skipCrds skips crds/ only; the chart's CRDs are templates (crds.enabled)", app.Metadata.Name)
	expectConfigDefault(t, objects)
	return objects
}

// renderChart renders the chart in dir of the source.
func renderChart(t *testing.T, source filesys.FileSystem, dir string, r chart.Release) []chart.Object {
	t.Helper()
	c, err := chart.Load(source, dir)
	if err != nil {
		t.Fatalf("loading the chart in %s: %v", dir, err)
	}
	objects, err := chart.Render(c, r)
	if err != nil {
		t.Fatalf("helm template %s: %v", dir, err)
	}
	return objects
}

// expectConfigDefault checks that a chart's rendering holds the objects
// config/default holds (test/chart compares them whole), besides those
// only the chart has (chart.OnlyInChart).
func expectConfigDefault(t *testing.T, objects []chart.Object) {
	t.Helper()
	want, err := chart.ConfigDefault(repoRoot, false)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(keysOf(slices.DeleteFunc(slices.Clone(objects), chart.OnlyInChart))).To(ConsistOf(keysOf(want)))
}

// objectOf converts a kustomize resource.
func objectOf(t *testing.T, r *resource.Resource) chart.Object {
	t.Helper()
	o, err := chart.NewObject(mapOf(t, r))
	if err != nil {
		t.Fatalf("converting %s: %v", r.CurId(), err)
	}
	return o
}

func keysOf(objects []chart.Object) []string {
	out := make([]string, 0, len(objects))
	for _, o := range objects {
		out = append(out, o.Key())
	}
	return out
}

func kindsOfObjects(objects []chart.Object) []string {
	out := make([]string, 0, len(objects))
	for _, o := range objects {
		out = append(out, o.Kind())
	}
	return out
}
