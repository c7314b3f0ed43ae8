package chart

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
)

// keepAnnotation is Helm's resource policy that spares an object on
// uninstall and on an upgrade that no longer renders it (helm
// pkg/kube ResourcePolicyAnno, KeepPolicy).
const keepAnnotation = "helm.sh/resource-policy"

// TestCRDValues: the CRDs are templates, config/default's whole with the
// defaults (keep annotation included); crds.keep=false leaves out only
// that annotation, crds.enabled=false the CRDs and their schema policy and
// nothing else.
func TestCRDValues(t *testing.T) {
	g := NewWithT(t)
	configCRDs := crdsOf(mustConfigDefault(t))
	g.Expect(configCRDs).To(HaveLen(2))
	for _, crd := range configCRDs {
		g.Expect(annotations(crd)).To(HaveKeyWithValue(keepAnnotation, "keep"), "config/crd: %s", crd.Key())
	}
	all := render(t, nil)
	expectSameObjects(t, crdsOf(all), configCRDs)
	g.Expect(slices.ContainsFunc(all, OnlyInChart)).To(BeTrue(), "the CRD schema policy comes with the CRDs")

	withoutKeep := crdsOf(render(t, map[string]any{"crds": map[string]any{"keep": false}}))
	for _, crd := range configCRDs {
		delete(annotations(crd), keepAnnotation)
	}
	expectSameObjects(t, withoutKeep, configCRDs)

	withoutCRDs := render(t, map[string]any{"crds": map[string]any{"enabled": false}})
	g.Expect(crdsOf(withoutCRDs)).To(BeEmpty())
	expectSameObjects(t, withoutCRDs, slices.DeleteFunc(slices.Clone(all), func(o Object) bool { return isCRD(o) || OnlyInChart(o) }))
}

// TestCRDValuesRefused: the schema refuses a crds value of the wrong type
// or name.
func TestCRDValuesRefused(t *testing.T) {
	for name, tt := range map[string]struct {
		values map[string]any
		says   string
	}{
		"a string for a switch":   {map[string]any{"crds": map[string]any{"enabled": "yes"}}, "/crds/enabled': got string, want boolean"},
		"cert-manager's old name": {map[string]any{"crds": map[string]any{"install": true}}, "additional properties 'install' not allowed"},
		"a switch for the block":  {map[string]any{"crds": false}, "/crds': got boolean, want object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderValues(t, tt.values)
			NewWithT(t).Expect(err).To(MatchError(And(
				ContainSubstring("values don't meet the specifications of the schema"), ContainSubstring(tt.says))))
		})
	}
}

func mustConfigDefault(t *testing.T) []Object {
	t.Helper()
	objects, err := ConfigDefault(repoRoot, false)
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

func isCRD(o Object) bool { return o.Kind() == "CustomResourceDefinition" }

// crdsOf are the CRDs among objects.
func crdsOf(objects []Object) []Object {
	return slices.DeleteFunc(slices.Clone(objects), func(o Object) bool { return !isCRD(o) })
}

// annotations is the object's annotations, the map itself.
func annotations(o Object) map[string]any {
	meta, _ := o["metadata"].(map[string]any)
	a, _ := meta["annotations"].(map[string]any)
	return a
}

// TestCRDsWithoutCRDValues renders the chart with values that have no crds
// block, as `helm upgrade --reuse-values` does: it merges the release's
// values over the values.yaml of the chart installed before, which had
// none. The CRDs are rendered, with the keep annotation.
func TestCRDsWithoutCRDValues(t *testing.T) {
	g := NewWithT(t)
	c, err := Load(diskFS(), chartDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Values).To(HaveKey("crds"))
	delete(c.Values, "crds")
	objects, err := Render(c, Release{Name: "embedops", Namespace: namespace})
	g.Expect(err).NotTo(HaveOccurred())
	expectSameObjects(t, crdsOf(objects), crdsOf(mustConfigDefault(t)))
}
