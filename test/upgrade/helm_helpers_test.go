package upgrade

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/test/harness"
)

// chartDir holds the chart in the repository, at every release since the
// baseline.
const chartDir = "charts/embedops"

// bareEnv starts a control plane of its own without embedops' CRDs, which
// a chart installs, and stops it when the test ends.
func bareEnv(t *testing.T) *harness.Env {
	t.Helper()
	bare, err := harness.StartEnv(harness.EnvOptions{CRDPaths: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bare.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return bare
}

// helmConfig is the Helm SDK's configuration for releases in namespace of
// the control plane kubeconfig reaches, stored in Secrets (Helm's default
// driver), as the helm command sets it up.
func helmConfig(t *testing.T, kubeconfig, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", t.Logf); err != nil {
		t.Fatalf("configuring Helm: %v", err)
	}
	return cfg
}

// releaseChart loads release's chart as `helm install <dir>` does.
func releaseChart(t *testing.T, release *Baseline) *chart.Chart {
	t.Helper()
	dir := t.TempDir()
	if err := release.WriteTree(chartDir, dir); err != nil {
		t.Fatal(err)
	}
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("loading the chart of %s: %v", release.Commit, err)
	}
	return c
}

// crdsDirRelease is the last release whose chart installed its CRDs from
// crds/, which Helm never upgrades: stop 39's. Its users upgrade once with
// --take-ownership (README, Helm); the tests of that step install it,
// whatever BASELINE names.
const crdsDirRelease = "672c32bb37a93ca20c41c1089d6d67f1a0b14c90"

// openRelease opens commit of the repository's history.
func openRelease(t *testing.T, commit string) *Baseline {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	release, err := OpenBaseline(root, commit)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// installsCRDsFromCRDsDir reports whether a chart installs CRDs from
// crds/, which Helm installs once and never owns or upgrades; otherwise
// its templates render them, owned by the release.
func installsCRDsFromCRDsDir(c *chart.Chart) bool {
	return len(c.CRDObjects()) > 0
}

// currentChart loads the working tree's chart.
func currentChart(t *testing.T, root string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(filepath.Join(root, chartDir))
	if err != nil {
		t.Fatalf("loading the working tree's chart: %v", err)
	}
	return c
}

// crdsOfFiles decodes CRDs from YAML files, by name, with the API server's
// defaults set, so that they compare with the CRDs it serves.
func crdsOfFiles(g Gomega, files map[string][]byte) map[string]*apiextensionsv1.CustomResourceDefinition {
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for name, data := range files {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.UnmarshalStrict(data, crd)).To(Succeed(), name)
		g.Expect(crd.Kind).To(Equal("CustomResourceDefinition"), name)
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
		crds[crd.Name] = crd
	}
	return crds
}

// treeCRDs are the working tree's CRDs, config/crd/bases, as controller-gen
// wrote them.
func treeCRDs(g Gomega, root string) map[string]*apiextensionsv1.CustomResourceDefinition {
	paths, err := filepath.Glob(filepath.Join(root, crdDir, "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		g.Expect(err).NotTo(HaveOccurred())
		files[p] = data
	}
	return crdsOfFiles(g, files)
}

// liveCRDs reads embedops' CRDs as the API server serves them.
func liveCRDs(t *testing.T, g Gomega, c client.Client) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, name := range crdNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: name}, crd)).To(Succeed(), name)
		crds[name] = crd
	}
	return crds
}

// helmOwned reports whether a live object is owned by release name in
// namespace, as Helm checks it (helm v3.22 pkg/action/validate.go,
// checkOwnership).
func helmOwned(annotations, labels map[string]string, name, namespace string) bool {
	return labels["app.kubernetes.io/managed-by"] == "Helm" &&
		annotations["meta.helm.sh/release-name"] == name && annotations["meta.helm.sh/release-namespace"] == namespace
}
