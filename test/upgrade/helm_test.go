package upgrade

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// The release as README's Helm section installs it.
const (
	releaseName      = "embedops"
	releaseNamespace = "embedops-system"
)

// TestHelmUpgradeFromTheBaselineChart installs the previous release's chart
// with the Helm SDK on a control plane of its own, with the previous
// release's examples and a binding stored, and upgrades it as README's Helm
// section says. Its templates render the CRDs, owned by the release, so a
// plain helm upgrade makes them the working tree's; uninstall keeps them
// (helm.sh/resource-policy: keep). No stored object is deleted at any
// step.
func TestHelmUpgradeFromTheBaselineChart(t *testing.T) {
	g := NewWithT(t)
	h := installChart(t, baseline)
	requireTemplatedCRDs(t, h)

	t.Log("helm upgrade: the working tree's CRDs, owned by the release")
	g.Expect(upgrade(h.helm, h.current, false, nil)).To(Succeed())
	expectCurrentCRDs(t, g, h.client, h.root)
	expectStored(t, g, h.client, h.stored)

	upgradeAgainThenUninstall(t, g, h)
}

// TestHelmUpgradeFromTheBaselineChartLeavingTheCRDs upgrades the previous
// release's chart with crds.enabled=false: the CRDs leave the release's
// manifest, and Helm keeps them as they were (helm.sh/resource-policy:
// keep), unwritten, with every stored object. Turning crds.enabled on
// again upgrades them: they still carry the release's ownership.
func TestHelmUpgradeFromTheBaselineChartLeavingTheCRDs(t *testing.T) {
	g := NewWithT(t)
	h := installChart(t, baseline)
	requireTemplatedCRDs(t, h)

	t.Log("helm upgrade --set crds.enabled=false: the CRDs are kept as they were")
	g.Expect(upgrade(h.helm, h.current, false, map[string]any{"crds": map[string]any{"enabled": false}})).To(Succeed())
	expectUnchanged(t, g, h.client, h.installed)
	expectStored(t, g, h.client, h.stored)

	t.Log("helm upgrade --set crds.enabled=true: the working tree's CRDs")
	g.Expect(upgrade(h.helm, h.current, false, map[string]any{"crds": map[string]any{"enabled": true}})).To(Succeed())
	expectCurrentCRDs(t, g, h.client, h.root)
	expectStored(t, g, h.client, h.stored)
}

// TestHelmUpgradeFromTheCRDsDirChart upgrades the last release whose chart
// installed its CRDs from crds/ (crdsDirRelease), as README's Helm section
// tells its users: without --take-ownership Helm refuses the CRDs that
// crds/ installed and changes nothing; with it they become the working
// tree's, owned by the release and kept; later upgrades need no flag, and
// uninstall keeps the CRDs. No stored object is deleted at any step.
func TestHelmUpgradeFromTheCRDsDirChart(t *testing.T) {
	g := NewWithT(t)
	h := installChart(t, openRelease(t, crdsDirRelease))

	t.Log("helm upgrade: refused, nothing changed")
	err := upgrade(h.helm, h.current, false, nil)
	g.Expect(err).To(MatchError(And(ContainSubstring("exists and cannot be imported into the current release"),
		ContainSubstring("invalid ownership metadata"))))
	expectUnchanged(t, g, h.client, h.installed)

	t.Log("helm upgrade --take-ownership: the working tree's CRDs, owned by the release")
	g.Expect(upgrade(h.helm, h.current, true, nil)).To(Succeed())
	expectCurrentCRDs(t, g, h.client, h.root)
	expectStored(t, g, h.client, h.stored)

	upgradeAgainThenUninstall(t, g, h)
}

// upgradeAgainThenUninstall checks the steps after an upgrade to the
// working tree's chart: a later upgrade needs no flag and changes nothing,
// and helm uninstall keeps the CRDs and so every stored object.
func upgradeAgainThenUninstall(t *testing.T, g *WithT, h *helmInstall) {
	t.Helper()
	t.Log("helm upgrade, again: no flag needed")
	g.Expect(upgrade(h.helm, h.current, false, nil)).To(Succeed())
	expectCurrentCRDs(t, g, h.client, h.root)

	t.Log("helm uninstall: the CRDs, and so every stored object, stay")
	_, err := action.NewUninstall(h.helm).Run(releaseName)
	g.Expect(err).NotTo(HaveOccurred())
	expectCurrentCRDs(t, g, h.client, h.root)
	expectStored(t, g, h.client, h.stored)
}

// TestHelmUpgradeFromTheCRDsDirChartLeavingTheCRDs upgrades crdsDirRelease's
// chart with crds.enabled=false: the CRDs stay that release's, unwritten
// (over older ones the controller then refuses to start:
// TestUpgradeInPlace). Turning crds.enabled on later upgrades them once
// they carry the release's ownership, which docs/operations.md has kubectl
// give them for a Helm without --take-ownership.
func TestHelmUpgradeFromTheCRDsDirChartLeavingTheCRDs(t *testing.T) {
	g := NewWithT(t)
	h := installChart(t, openRelease(t, crdsDirRelease))

	t.Log("helm upgrade --set crds.enabled=false: the CRDs are left as they were")
	g.Expect(upgrade(h.helm, h.current, false, map[string]any{"crds": map[string]any{"enabled": false}})).To(Succeed())
	expectUnchanged(t, g, h.client, h.installed)
	expectStored(t, g, h.client, h.stored)

	t.Log("kubectl label and annotate the CRDs for the release, helm upgrade --set crds.enabled=true: the working tree's CRDs")
	adopt(t, g, h.client)
	g.Expect(upgrade(h.helm, h.current, false, map[string]any{"crds": map[string]any{"enabled": true}})).To(Succeed())
	expectCurrentCRDs(t, g, h.client, h.root)
	expectStored(t, g, h.client, h.stored)
}

// requireTemplatedCRDs stops a test of the templated layout when BASELINE
// names a release older than it (-upgrade.baseline may): that release's
// upgrade is TestHelmUpgradeFromTheCRDsDirChart's.
func requireTemplatedCRDs(t *testing.T, h *helmInstall) {
	t.Helper()
	if h.crdsDir {
		t.Fatalf("%s's chart installs its CRDs from crds/: its upgrade is TestHelmUpgradeFromTheCRDsDirChart's", h.release.Commit)
	}
}

// adopt gives embedops' CRDs the release's ownership, as
// docs/operations.md's `kubectl label` and `kubectl annotate` do.
func adopt(t *testing.T, g *WithT, c client.Client) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},`+
		`"annotations":{"meta.helm.sh/release-name":%q,"meta.helm.sh/release-namespace":%q}}}`, releaseName, releaseNamespace)
	for _, name := range crdNames {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		g.Expect(c.Patch(t.Context(), crd, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed(), name)
	}
}

// helmInstall is a release's chart installed on a control plane of its
// own, with objects stored.
type helmInstall struct {
	release *Baseline
	// crdsDir: the release's chart installed the CRDs from crds/.
	crdsDir   bool
	root      string
	client    client.Client
	helm      *action.Configuration
	current   *chart.Chart
	installed map[string]*apiextensionsv1.CustomResourceDefinition
	stored    []storedObject
}

// installChart runs `helm install --create-namespace` of release's chart
// with its defaults, as README's Helm section of that release says, on a
// control plane without embedops' CRDs, and stores that release's examples
// and a binding in it.
func installChart(t *testing.T, release *Baseline) *helmInstall {
	t.Helper()
	g := NewWithT(t)
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	bare := bareEnv(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(bare.WriteKubeconfig(kubeconfig)).To(Succeed())
	helm := helmConfig(t, kubeconfig, releaseNamespace)
	previous := releaseChart(t, release)
	install := action.NewInstall(helm)
	install.ReleaseName, install.Namespace, install.CreateNamespace = releaseName, releaseNamespace, true
	_, err = install.Run(previous, nil)
	g.Expect(err).NotTo(HaveOccurred(), "helm install of %s's chart", release.Commit)
	return &helmInstall{
		release: release, crdsDir: installsCRDsFromCRDsDir(previous),
		root: root, client: bare.Client, helm: helm, current: currentChart(t, root),
		installed: expectReleaseCRDs(t, g, bare.Client, release, previous),
		stored:    storeObjects(t, g, bare.Client, release),
	}
}

// upgrade runs `helm upgrade --reset-then-reuse-values` to c with values,
// with --take-ownership when take.
func upgrade(helm *action.Configuration, c *chart.Chart, take bool, values map[string]any) error {
	u := action.NewUpgrade(helm)
	u.Namespace, u.ResetThenReuseValues, u.TakeOwnership = releaseNamespace, true, take
	if values == nil {
		values = map[string]any{}
	}
	_, err := u.Run(releaseName, c, values)
	return err
}

// expectReleaseCRDs checks that release's chart installed its own CRDs,
// and returns them as installed: from crds/, as Helm installs those,
// without the release's ownership; or from its templates (generated from
// that release's config/crd/bases), owned by the release and kept.
func expectReleaseCRDs(t *testing.T, g *WithT, c client.Client, release *Baseline, previous *chart.Chart) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	fromCRDsDir := installsCRDsFromCRDsDir(previous)
	files, where := map[string][]byte{}, "in crds/"
	for _, f := range previous.CRDObjects() {
		files[f.Filename] = f.File.Data
	}
	if !fromCRDsDir {
		var err error
		files, err = release.Files(crdDir)
		g.Expect(err).NotTo(HaveOccurred())
		where = "rendered from its templates, as " + crdDir + " has them"
	}
	want := crdsOfFiles(g, files)
	g.Expect(slices.Sorted(maps.Keys(want))).To(Equal(slices.Sorted(slices.Values(crdNames))),
		"the CRDs of %s's chart, %s", release.Commit, where)
	live := liveCRDs(t, g, c)
	for name, crd := range live {
		g.Expect(crd.Spec).To(Equal(want[name].Spec), "%s as %s's chart has it", name, release.Commit)
		g.Expect(helmOwned(crd.Annotations, crd.Labels, releaseName, releaseNamespace)).To(Equal(!fromCRDsDir),
			"%s: Helm owns the CRDs its templates render, not those of crds/", name)
	}
	return live
}

// expectUnchanged checks that the CRDs were not written since installed.
func expectUnchanged(t *testing.T, g *WithT, c client.Client, installed map[string]*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	for name, crd := range liveCRDs(t, g, c) {
		g.Expect(crd.ResourceVersion).To(Equal(installed[name].ResourceVersion), "%s was written", name)
	}
}

// expectCurrentCRDs checks that the CRDs are the working tree's: their
// spec as config/crd/bases has it, its schema version, owned by the
// release and kept by Helm.
func expectCurrentCRDs(t *testing.T, g *WithT, c client.Client, root string) {
	t.Helper()
	for name, crd := range expectTreeCRDs(t, g, c, root) {
		g.Expect(crd.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"), name)
		g.Expect(helmOwned(crd.Annotations, crd.Labels, releaseName, releaseNamespace)).To(BeTrue(),
			"%s is not the release's: labels %v, annotations %v", name, crd.Labels, crd.Annotations)
	}
}

// expectTreeCRDs checks that the live CRDs have the working tree's spec, as
// config/crd/bases has it, and its schema version, and returns them.
func expectTreeCRDs(t *testing.T, g *WithT, c client.Client, root string) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	want := treeCRDs(g, root)
	live := liveCRDs(t, g, c)
	for name, crd := range live {
		g.Expect(crd.Spec).To(Equal(want[name].Spec), "%s as the working tree has it", name)
		g.Expect(crd.Annotations).To(HaveKeyWithValue(embedopsv1.SchemaVersionAnnotation, strconv.Itoa(embedopsv1.SchemaVersion)), name)
	}
	return live
}

// storedObject is an object the upgrade must not delete.
type storedObject struct {
	obj *unstructured.Unstructured
	uid types.UID
}

// storeObjects stores release's examples (servers, their Secret and
// claims) and a binding with its claim in a namespace of c's.
func storeObjects(t *testing.T, g *WithT, c client.Client, release *Baseline) []storedObject {
	t.Helper()
	namespace := harness.Namespace(t, c)
	objects := baselineExamples(t, release, namespace)
	g.Expect(servers(objects)).NotTo(BeEmpty())
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cache-0"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	for _, obj := range objects {
		g.Expect(c.Create(t.Context(), obj)).To(Succeed(), "%s %s of %s", obj.GetKind(), obj.GetName(), release.Commit)
	}
	for _, typed := range []client.Object{claim, binding(namespace, claim.Name)} {
		g.Expect(c.Create(t.Context(), typed)).To(Succeed())
		gvk, err := c.GroupVersionKindFor(typed)
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(typed), u)).To(Succeed())
		objects = append(objects, u)
	}
	stored := make([]storedObject, 0, len(objects))
	for _, obj := range objects {
		stored = append(stored, storedObject{obj: obj, uid: obj.GetUID()})
	}
	return stored
}

// expectStored checks that every stored object is still there, the same
// object (uid).
func expectStored(t *testing.T, g *WithT, c client.Client, stored []storedObject) {
	t.Helper()
	var kinds []string
	for _, s := range stored {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(s.obj.GroupVersionKind())
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(s.obj), live)).To(Succeed(), "%s %s", s.obj.GetKind(), s.obj.GetName())
		g.Expect(live.GetUID()).To(Equal(s.uid), "%s %s was recreated", s.obj.GetKind(), s.obj.GetName())
		g.Expect(live.GetDeletionTimestamp()).To(BeNil(), "%s %s is being deleted", s.obj.GetKind(), s.obj.GetName())
		kinds = append(kinds, s.obj.GetKind())
	}
	t.Logf("still stored: %s", strings.Join(kinds, ", "))
}

// binding is a valid binding of claimName, as a controller records one.
func binding(namespace, claimName string) *embedopsv1.ModelCacheBinding {
	commit, digest := strings.Repeat("1", 40), "sha256:"+strings.Repeat("a", 64)
	return &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: namespace},
		Spec: embedopsv1.ModelCacheBindingSpec{
			Identity: embedopsv1.CacheIdentity{Model: "BAAI/bge-small-en-v1.5", Revision: "main", SharingDomain: namespace, Key: digest},
			Decision: embedopsv1.CacheDecision{
				Mode:          embedopsv1.CacheModeShared,
				Size:          resource.MustParse("10Gi"),
				AccessModes:   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				ReclaimPolicy: embedopsv1.ReclaimPolicyRetain,
				RetainFor:     metav1.Duration{Duration: 24 * 60 * 60 * 1e9},
				Digest:        digest,
			},
			Source: embedopsv1.DecisionSource{
				Method: embedopsv1.SourceFlux, Revision: "main@sha1:" + commit, Commit: commit,
				DecidedAt: metav1.Now(),
			},
			Resources: embedopsv1.CacheResources{PersistentVolumeClaimNames: []string{claimName}},
		},
	}
}
