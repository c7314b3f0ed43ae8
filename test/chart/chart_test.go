package chart

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the chart's generated files from config/")

const (
	// repoRoot is the repository root, seen from this package.
	repoRoot = "../.."
	// namespace is config/default's namespace, the release's here.
	namespace = "embedops-system"
)

// TestGeneratedFiles checks, or with -update writes, the chart's copies of
// what config/ renders: a CRD or a role changed by `make manifests`, or an
// alert changed in config/prometheus, fails here until copied.
func TestGeneratedFiles(t *testing.T) {
	g := NewWithT(t)
	files, err := Generated(repoRoot)
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(repoRoot, Dir)
	// crds/ held the CRDs until they became templates: Helm would install
	// a CRD there and then refuse the template that renders it again.
	if *update {
		g.Expect(os.RemoveAll(filepath.Join(dir, "crds"))).To(Succeed())
		g.Expect(os.RemoveAll(filepath.Join(dir, CRDDir))).To(Succeed())
	}
	for name, want := range files {
		file := filepath.Join(dir, name)
		if *update {
			g.Expect(os.MkdirAll(filepath.Dir(file), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(file, want, 0o644)).To(Succeed())
			continue
		}
		got, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred(), "run `make manifests`")
		g.Expect(string(got)).To(Equal(string(want)), "%s differs from config/: run `make manifests`", name)
	}
	g.Expect(filepath.Join(dir, "crds")).NotTo(BeAnExistingFile(), "run `make manifests`: the CRDs are templates now")
	crds, err := filepath.Glob(filepath.Join(dir, CRDDir, "*"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, file := range crds {
		g.Expect(files).To(HaveKey(CRDDir+"/"+filepath.Base(file)), "%s is no CRD of config/default", file)
	}
}

// TestChartInstallsConfigDefault compares the chart's objects with
// config/default's, whole: same names, labels, annotations and specs.
// Helm adds nothing to a rendering (its managed-by label and release
// annotations go on the live objects only), so nothing is ignored but
// what only the chart renders (OnlyInChart).
func TestChartInstallsConfigDefault(t *testing.T) {
	prometheus := map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"rule":           map[string]any{"enabled": true},
		"teiPodMonitor":  map[string]any{"enabled": true},
	}
	tests := []struct {
		name       string
		values     map[string]any
		prometheus bool
		without    []string
	}{{
		// Helm creates the release namespace (--create-namespace) and
		// stores the release there before anything else, so by default
		// the chart does not render it.
		name:    "default values: all but the Namespace",
		without: []string{"Namespace"},
	}, {
		name:   "namespace.create: all",
		values: map[string]any{"namespace": map[string]any{"create": true}},
	}, {
		name:       "the Prometheus objects: config/default with config/prometheus",
		values:     map[string]any{"namespace": map[string]any{"create": true}, "prometheus": prometheus},
		prometheus: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			want, err := ConfigDefault(repoRoot, tt.prometheus)
			g.Expect(err).NotTo(HaveOccurred())
			want = slices.DeleteFunc(want, func(o Object) bool { return slices.Contains(tt.without, o.Kind()) })
			expectSameObjects(t, slices.DeleteFunc(render(t, tt.values), OnlyInChart), want)
		})
	}
}

// TestChartInstallsConfigGrafana compares the chart's dashboard ConfigMap
// with config/grafana's, whole: only grafana.dashboard.enabled adds it.
func TestChartInstallsConfigGrafana(t *testing.T) {
	g := NewWithT(t)
	want, err := ConfigGrafana(repoRoot, namespace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(want).To(HaveLen(1))
	configMaps := func(objects []Object) []Object {
		return slices.DeleteFunc(objects, func(o Object) bool { return o.Kind() != "ConfigMap" })
	}
	g.Expect(configMaps(render(t, nil))).To(BeEmpty(), "no dashboard by default")
	got := configMaps(render(t, map[string]any{"grafana": map[string]any{"dashboard": map[string]any{"enabled": true}}}))
	expectSameObjects(t, got, want)
}

// expectSameObjects compares got and want by key, then each object whole
// as YAML, so that a failure shows where they differ.
func expectSameObjects(t *testing.T, got, want []Object) {
	t.Helper()
	g := NewWithT(t)
	gotByKey, err := ByKey(got)
	g.Expect(err).NotTo(HaveOccurred())
	wantByKey, err := ByKey(want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys(gotByKey)).To(ConsistOf(keys(wantByKey)))
	for key, w := range wantByKey {
		if o, ok := gotByKey[key]; ok {
			g.Expect(yamlOf(t, o)).To(Equal(yamlOf(t, w)), "%s differs from config/default's", key)
		}
	}
}

// render renders the chart from disk as release embedops in namespace,
// failing the test on an error.
func render(t *testing.T, values map[string]any) []Object {
	t.Helper()
	objects, err := renderValues(t, values)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return objects
}

// renderValues renders the chart from disk with values.
func renderValues(t *testing.T, values map[string]any) ([]Object, error) {
	t.Helper()
	c, err := Load(diskFS(), chartDir())
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return Render(c, Release{Name: "embedops", Namespace: namespace, Values: values})
}

// diskFS is the repository on disk.
func diskFS() filesys.FileSystem { return filesys.MakeFsOnDisk() }

// chartDir is the chart's directory, seen from this package.
func chartDir() string { return filepath.Join(repoRoot, Dir) }

func keys(m map[string]Object) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func yamlOf(t *testing.T, o Object) string {
	t.Helper()
	data, err := yaml.Marshal(o)
	if err != nil {
		t.Fatalf("marshalling %s: %v", o.Key(), err)
	}
	return string(data)
}
