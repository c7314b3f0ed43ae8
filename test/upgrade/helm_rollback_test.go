package upgrade

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	charttest "github.com/embedops/embedops/test/chart"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// schemaPolicy names the chart's ValidatingAdmissionPolicy and its
// binding (templates/crd-schema-policy.yaml).
const schemaPolicy = "embedops-crd-schema-version"

// TestHelmRollbackKeepsTheNewerCRDs installs a chart one schema version
// older than the working tree's, upgrades it to the tree's chart, stores a
// server with spec.rollout.maxSurge, which the older schema lacks, and
// rolls back: as `helm rollback` does and as Flux helm-controller's
// rollback remediation configures it (HelmRelease spec.rollback.force and
// cleanupOnFail; fluxcd/helm-controller internal/action/rollback.go,
// newRollback). Both apply the older revision's stored manifest, whose
// CRDs the chart's schema policy refuses: the rollback fails saying so,
// the CRDs stay the tree's and the server keeps its field. The previous
// release's controller then starts over them, as its schema check allows
// a CRD newer than itself.
func TestHelmRollbackKeepsTheNewerCRDs(t *testing.T) {
	for name, configure := range map[string]func(*action.Rollback){
		"helm rollback": func(*action.Rollback) {},
		"helm-controller's rollback remediation": func(r *action.Rollback) {
			r.Force, r.CleanupOnFail = true, true
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHelmCluster(t)
			older := olderChart(t, g, h.root)
			g.Expect(h.install(releaseName, older, nil)).To(Succeed())
			expectSchemaVersion(t, g, h.client, embedopsv1.SchemaVersion-1)

			t.Log("helm upgrade to the working tree's chart")
			g.Expect(upgrade(h.helm, currentChart(t, h.root), false, nil)).To(Succeed())
			expectCurrentCRDs(t, g, h.client, h.root)
			server := storeSurgeServer(t, g, h.client)
			waitForSchemaPolicy(t, g, h.client)

			t.Log(name + " to the older chart's revision: refused by the schema policy")
			rollback := action.NewRollback(h.helm)
			rollback.Version = 1
			configure(rollback)
			g.Expect(rollback.Run(releaseName)).To(MatchError(And(
				ContainSubstring(schemaPolicy),
				ContainSubstring(fmt.Sprintf("has schema version %d and is kept", embedopsv1.SchemaVersion)))))
			expectCurrentCRDs(t, g, h.client, h.root)
			expectSurge(t, g, h.client, server)

			t.Log("the previous release's controller starts over the newer CRDs")
			previous, err := baseline.Controller(h.root)
			g.Expect(err).NotTo(HaveOccurred())
			startController(t, "the previous release's controller", previous, h.kubeconfig)
		})
	}
}

// TestHelmUpgradeToAnOlderChartKeepsTheNewerCRDs upgrades a release of the
// working tree's chart to the older chart, as a HelmRelease moved back to
// an older chart version does: its CRD templates find newer CRDs in the
// cluster and do not render them, Helm keeps them (their keep annotation),
// and the server keeps its field. Upgrading to the tree's chart again
// renders them, still the release's.
func TestHelmUpgradeToAnOlderChartKeepsTheNewerCRDs(t *testing.T) {
	g := NewWithT(t)
	h := newHelmCluster(t)
	g.Expect(h.install(releaseName, currentChart(t, h.root), nil)).To(Succeed())
	installed := expectTreeCRDs(t, g, h.client, h.root)
	server := storeSurgeServer(t, g, h.client)

	t.Log("helm upgrade to the older chart: the CRDs are not rendered, and kept")
	g.Expect(upgrade(h.helm, olderChart(t, g, h.root), false, nil)).To(Succeed())
	expectUnchanged(t, g, h.client, installed)
	expectCurrentCRDs(t, g, h.client, h.root)
	expectSurge(t, g, h.client, server)
	rel, err := action.NewGet(h.helm).Run(releaseName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Manifest).NotTo(ContainSubstring("kind: CustomResourceDefinition"), "the older chart's manifest")

	t.Log("helm upgrade to the working tree's chart: the CRDs are the release's again")
	g.Expect(upgrade(h.helm, currentChart(t, h.root), false, nil)).To(Succeed())
	expectCurrentCRDs(t, g, h.client, h.root)
	rel, err = action.NewGet(h.helm).Run(releaseName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Manifest).To(ContainSubstring("kind: CustomResourceDefinition"))
}

// TestHelmInstallUnderAnotherNameOverKeptCRDs installs the chart, uninstalls
// it (the CRDs are kept, with the release's name on them) and installs it
// again under another name: refused before anything is written, saying
// what to do; with crds.enabled=false it installs and leaves the CRDs as
// they are; once the CRDs are annotated for the new release, as the
// message says, it installs and owns them.
func TestHelmInstallUnderAnotherNameOverKeptCRDs(t *testing.T) {
	g := NewWithT(t)
	h := newHelmCluster(t)
	current := currentChart(t, h.root)
	g.Expect(h.install(releaseName, current, nil)).To(Succeed())
	_, err := action.NewUninstall(h.helm).Run(releaseName)
	g.Expect(err).NotTo(HaveOccurred())
	kept := expectTreeCRDs(t, g, h.client, h.root)

	const next = "embedops-next"
	t.Log("helm install under another name: refused, saying what to do")
	err = h.install(next, current, nil)
	g.Expect(err).To(MatchError(And(
		ContainSubstring(fmt.Sprintf("belongs to Helm release %s in namespace %s", releaseName, releaseNamespace)),
		ContainSubstring("--set crds.enabled=false"),
		ContainSubstring("meta.helm.sh/release-name="+next))))
	expectUnchanged(t, g, h.client, kept)

	t.Log("helm install --set crds.enabled=false: installed, the CRDs as they were")
	g.Expect(h.install(next, current, map[string]any{"crds": map[string]any{"enabled": false}})).To(Succeed())
	expectUnchanged(t, g, h.client, kept)
	_, err = action.NewUninstall(h.helm).Run(next)
	g.Expect(err).NotTo(HaveOccurred())

	t.Log("kubectl annotate the CRDs for the new release, helm install: the release's")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"meta.helm.sh/release-name":%q,"meta.helm.sh/release-namespace":%q}}}`, next, releaseNamespace)
	for _, name := range crdNames {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		g.Expect(h.client.Patch(t.Context(), crd, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed(), name)
	}
	g.Expect(h.install(next, current, nil)).To(Succeed())
	for name, crd := range expectTreeCRDs(t, g, h.client, h.root) {
		g.Expect(helmOwned(crd.Annotations, crd.Labels, next, releaseNamespace)).To(BeTrue(), name)
	}
}

// helmCluster is a control plane of its own without embedops' CRDs, with
// the Helm SDK configured for releaseNamespace.
type helmCluster struct {
	root       string
	kubeconfig string
	client     client.Client
	helm       *action.Configuration
}

// newHelmCluster starts a helmCluster, stopped when the test ends.
func newHelmCluster(t *testing.T) *helmCluster {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bare := bareEnv(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := bare.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return &helmCluster{root: root, kubeconfig: kubeconfig, client: bare.Client, helm: helmConfig(t, kubeconfig, releaseNamespace)}
}

// install runs `helm install --create-namespace` of c as name with values.
func (h *helmCluster) install(name string, c *chart.Chart, values map[string]any) error {
	install := action.NewInstall(h.helm)
	install.ReleaseName, install.Namespace, install.CreateNamespace = name, releaseNamespace, true
	if values == nil {
		values = map[string]any{}
	}
	_, err := install.Run(c, values)
	return err
}

// olderChart is the working tree's chart with CRD templates one schema
// version older, as a release before the tree's schema had them: both
// carry embedopsv1.SchemaVersion-1, and the EmbeddingServer's lacks
// spec.rollout.maxSurge. They are made as `make manifests` makes the
// tree's (charttest.CRDTemplate), so only those changes differ.
func olderChart(t *testing.T, g *WithT, root string) *chart.Chart {
	t.Helper()
	c := currentChart(t, root)
	objects, err := charttest.ConfigDefault(root, false)
	g.Expect(err).NotTo(HaveOccurred())
	older := map[string][]byte{}
	for _, o := range objects {
		if o.Kind() != "CustomResourceDefinition" {
			continue
		}
		meta := o["metadata"].(map[string]any)
		meta["annotations"].(map[string]any)[embedopsv1.SchemaVersionAnnotation] = strconv.Itoa(embedopsv1.SchemaVersion - 1)
		if o.Name() == crdNames[0] {
			dropMaxSurge(g, o)
		}
		data, err := yaml.Marshal(o)
		g.Expect(err).NotTo(HaveOccurred())
		older[filepath.Join(charttest.CRDDir, o.Name()+".yaml")], err = charttest.CRDTemplate(data)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(older).To(HaveLen(len(crdNames)))
	for _, f := range c.Templates {
		if data, ok := older[f.Name]; ok {
			f.Data = data
			delete(older, f.Name)
		}
	}
	g.Expect(older).To(BeEmpty(), "the tree's chart has no template for these CRDs")
	return c
}

// dropMaxSurge removes spec.rollout.maxSurge from every version of the
// EmbeddingServer CRD's schema.
func dropMaxSurge(g *WithT, crd charttest.Object) {
	versions, _, err := unstructured.NestedSlice(crd, "spec", "versions")
	g.Expect(err).NotTo(HaveOccurred())
	for _, v := range versions {
		rollout, found, err := unstructured.NestedMap(v.(map[string]any),
			"schema", "openAPIV3Schema", "properties", "spec", "properties", "rollout", "properties")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).To(BeTrue(), "spec.rollout in the CRD's schema")
		g.Expect(rollout).To(HaveKey("maxSurge"))
		delete(rollout, "maxSurge")
		g.Expect(unstructured.SetNestedMap(v.(map[string]any), rollout,
			"schema", "openAPIV3Schema", "properties", "spec", "properties", "rollout", "properties")).To(Succeed())
	}
	g.Expect(unstructured.SetNestedSlice(crd, versions, "spec", "versions")).To(Succeed())
}

// expectSchemaVersion checks that embedops' live CRDs carry version.
func expectSchemaVersion(t *testing.T, g *WithT, c client.Client, version int) {
	t.Helper()
	for name, crd := range liveCRDs(t, g, c) {
		g.Expect(crd.Annotations).To(HaveKeyWithValue(embedopsv1.SchemaVersionAnnotation, strconv.Itoa(version)), name)
	}
}

// storeSurgeServer stores a server with spec.rollout.maxSurge in a
// namespace of its own and returns it.
func storeSurgeServer(t *testing.T, g *WithT, c client.Client) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := fixtures.EmbeddingServer(harness.Namespace(t, c), "surge", fixtures.WithMaxSurge(intstr.FromInt32(0)))
	g.Expect(c.Create(t.Context(), server)).To(Succeed())
	expectSurge(t, g, c, server)
	return server
}

// expectSurge checks that the API server still returns the server's
// spec.rollout.maxSurge: a CRD without it would prune it on every read.
func expectSurge(t *testing.T, g *WithT, c client.Client, server *embedopsv1.EmbeddingServer) {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(serverGVK)
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(server), live)).To(Succeed())
	surge, found, err := unstructured.NestedFieldNoCopy(live.Object, "spec", "rollout", "maxSurge")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "server %s lost spec.rollout.maxSurge", server.Name)
	g.Expect(surge).To(BeEquivalentTo(0))
}

// waitForSchemaPolicy waits until the API server enforces the chart's
// schema policy, which it loads asynchronously after its creation: a
// server-side dry run lowering a CRD's schema version is refused.
func waitForSchemaPolicy(t *testing.T, g *WithT, c client.Client) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, embedopsv1.SchemaVersionAnnotation, strconv.Itoa(embedopsv1.SchemaVersion-1))
	g.Eventually(func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdNames[1]}}
		return c.Patch(t.Context(), crd, client.RawPatch(types.MergePatchType, []byte(patch)), client.DryRunAll)
	}).WithTimeout(upgradeTimeout).WithPolling(100*time.Millisecond).Should(MatchError(ContainSubstring(schemaPolicy)),
		"the schema policy refuses a lower schema version")
}
