package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// upgradeTimeout bounds each wait: envtest answers in milliseconds, but the
// machine may be shared and the controllers are processes of their own.
const upgradeTimeout = 2 * time.Minute

// controllerArgs run either release as config/manager does, with the
// populator, except outside a cluster, as make dev does: pod addresses are
// unreachable from here, and only one controller runs at a time, so no
// leader election.
var controllerArgs = []string{"--populator-image=" + populatorImage, "--endpoint-check=off"}

// bindingController is the name controller-runtime gives the binding
// reconciler (its kind, lower case), the label of its reconcile metrics.
const bindingController = "modelcachebinding"

// crdNames are embedops' CRDs.
var crdNames = []string{"embeddingservers.embedops.dev", "modelcachebindings.embedops.dev"}

// TestUpgradeInPlace upgrades the previous release to the working tree with
// the previous release's examples running, and checks README's promise:
// every object readable and reconciled, no server restarted, no binding
// rewritten, and the stored version plan kept.
func TestUpgradeInPlace(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(upgradeTimeout)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx := t.Context()
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("upgrading from %s (%s)", baseline.Commit, baseline.Subject)
	previous, err := baseline.Controller(root)
	g.Expect(err).NotTo(HaveOccurred())
	current, err := harness.BuildController(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
	namespace := harness.Namespace(t, env.Client)

	// The previous release runs its examples until every server is Ready.
	objects := baselineExamples(t, baseline, namespace)
	for _, obj := range objects {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed(), "%s %s of %s", obj.GetKind(), obj.GetName(), baseline.Commit)
	}
	names := servers(objects)
	g.Expect(names).NotTo(BeEmpty(), "the baseline's examples hold no EmbeddingServer")
	old := startController(t, "the previous release's controller", previous, kubeconfig)
	g.Eventually(func(g Gomega) {
		playCluster(ctx, g, namespace)
		g.Expect(readyServers(ctx, g, namespace)).To(HaveLen(len(names)))
	}).Should(Succeed(), "the previous release's servers become Ready")
	g.Expect(old.Stop()).To(Succeed())
	before := takeSnapshot(ctx, g, namespace)
	g.Expect(before.bindings).NotTo(BeEmpty(), "the previous release recorded no binding")
	g.Expect(before.statefulSets).To(HaveLen(len(names)))
	t.Logf("the previous release runs %d servers Ready with %d bindings; other objects: %v", len(names), len(before.bindings), before.kinds())
	for name, binding := range before.bindings {
		commit, _, _ := unstructured.NestedString(binding.Object, "status", "realized", "resolvedCommit")
		g.Expect(commit).NotTo(BeEmpty(), "binding %s: the previous release's populator recorded no commit", name)
	}

	// An upgrade may leave the CRDs as they were (crds.enabled=false, a
	// chart with crds/): over the previous release's CRDs, the current
	// controller starts only if their schema is its own.
	expectRefusedOverOlderCRDs(t, g, current, kubeconfig)
	compareSnapshots(t, before, takeSnapshot(ctx, g, namespace))

	// The upgrade: the working tree's CRDs over the previous ones, then its
	// controller. Until the Deployment has rolled, the previous controller
	// runs on the current CRDs: it reconciles every server once there.
	g.Expect(operator.InstallCRDs(env.Config)).To(Succeed())
	expectStorageVersionPlan(ctx, g)
	old = startController(t, "the previous release's controller on the current CRDs", previous, kubeconfig)
	reconcileAll(ctx, g, namespace, names)
	g.Expect(old.Stop()).To(Succeed())
	proc := startController(t, "the current release's controller", current, kubeconfig)
	reconcileAll(ctx, g, namespace, names)
	g.Eventually(func(g Gomega) {
		g.Expect(reconciles(ctx, g, proc, bindingController)).To(BeNumerically(">=", len(before.bindings)))
	}).Should(Succeed(), "the current release reconciles every binding")

	after := takeSnapshot(ctx, g, namespace)
	compareSnapshots(t, before, after)
	expectReadable(ctx, g, objects, after)
	expectStorageVersionPlan(ctx, g)
}

// expectRefusedOverOlderCRDs starts the current controller over the
// installed CRDs, the previous release's: when their
// embedopsv1.SchemaVersionAnnotation is older than the controller's, it
// exits before it is ready, naming the CRD and the command that upgrades
// it (and the caller checks that it wrote nothing). CRDs of the
// controller's own schema are left to the rest of the test.
func expectRefusedOverOlderCRDs(t *testing.T, g *WithT, binary, kubeconfig string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Name: crdNames[0]}, crd)).To(Succeed())
	version := embedopsv1.UnversionedSchema
	if annotation, ok := crd.Annotations[embedopsv1.SchemaVersionAnnotation]; ok {
		var err error
		version, err = strconv.Atoi(annotation)
		g.Expect(err).NotTo(HaveOccurred())
	}
	if version >= embedopsv1.SchemaVersion {
		t.Logf("the previous release's CRDs have the current schema (%d): the controller would start over them", version)
		return
	}
	proc, err := harness.StartController(t.Context(), binary, kubeconfig, controllerArgs...)
	if err == nil {
		_ = proc.Stop()
	}
	g.Expect(err).To(MatchError(And(ContainSubstring("exited before it was ready"),
		ContainSubstring(fmt.Sprintf("has schema version %d, older than this controller's %d", version, embedopsv1.SchemaVersion)),
		ContainSubstring("kubectl apply --server-side --force-conflicts -k config/crd"))))
}

// startController starts a release's controller, described by what, and
// stops it when the test ends, logging its output if the test failed.
func startController(t *testing.T, what, binary, kubeconfig string) *harness.ControllerProcess {
	t.Helper()
	proc, err := harness.StartController(t.Context(), binary, kubeconfig, controllerArgs...)
	if err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	t.Cleanup(func() {
		if err := proc.Stop(); err != nil {
			t.Errorf("stopping %s: %v", what, err)
		}
	})
	logsOnFailure(t, what, proc.Logs)
	return proc
}

// reconcileAll has the running controller reconcile every server and waits
// until each is Ready for its generation, playing the cluster meanwhile.
func reconcileAll(ctx context.Context, g *WithT, namespace string, names []string) {
	token := requestReconcile(ctx, g, namespace, names)
	g.Eventually(func(g Gomega) {
		playCluster(ctx, g, namespace)
		ready := readyServers(ctx, g, namespace)
		g.Expect(ready).To(HaveLen(len(names)))
		for name, server := range ready {
			handled, _, _ := unstructured.NestedString(server.Object, "status", "lastHandledReconcileAt")
			g.Expect(handled).To(Equal(token), "server %s has not handled the reconcile request", name)
		}
	}).Should(Succeed(), "every server reconciled after the request %s and Ready", token)
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt on the servers to a
// new token, which a server's status echoes once the running controller
// reconciled it after the request, and returns the token.
func requestReconcile(ctx context.Context, g Gomega, namespace string, names []string) string {
	token := fmt.Sprintf("upgrade-%d", time.Now().UnixNano())
	for _, name := range names {
		server := &metav1.PartialObjectMetadata{}
		server.SetGroupVersionKind(serverGVK)
		server.SetNamespace(namespace)
		server.SetName(name)
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token))
		g.Expect(env.Client.Patch(ctx, server, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
	}
	return token
}

// reconciles is how many reconciles of the controller named by name the
// process finished without an error.
func reconciles(ctx context.Context, g Gomega, proc *harness.ControllerProcess, name string) float64 {
	families, err := proc.Metrics(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	family, ok := families["controller_runtime_reconcile_total"]
	g.Expect(ok).To(BeTrue(), "no controller_runtime_reconcile_total")
	for _, metric := range family.GetMetric() {
		labels := map[string]string{}
		for _, label := range metric.GetLabel() {
			labels[label.GetName()] = label.GetValue()
		}
		if labels["controller"] == name && labels["result"] != "error" {
			total += metric.GetCounter().GetValue()
		}
	}
	return total
}

// expectReadable reads every object the examples made, and every binding,
// through the working tree's API types, which must know every field the
// API server returns: an unknown one would be dropped by the current
// controller's typed client.
func expectReadable(ctx context.Context, g Gomega, objects []*unstructured.Unstructured, after *snapshot) {
	for _, obj := range objects {
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(obj.GroupVersionKind())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), stored)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		if obj.GroupVersionKind() == serverGVK {
			decodeStrict(g, stored, &embedopsv1.EmbeddingServer{})
		}
	}
	for _, binding := range after.bindings {
		decodeStrict(g, binding, &embedopsv1.ModelCacheBinding{})
	}
}

// decodeStrict decodes obj into into, failing on any field into's type
// does not have.
func decodeStrict(g Gomega, obj *unstructured.Unstructured, into client.Object) {
	data, err := json.Marshal(obj.Object)
	g.Expect(err).NotTo(HaveOccurred())
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	g.Expect(decoder.Decode(into)).To(Succeed(), "%s %s read through the current API types", obj.GetKind(), obj.GetName())
}

// expectStorageVersionPlan checks README's stored version plan (Upgrades):
// every embedops CRD stores v1alpha1 and has never stored another version,
// and every version ever stored is still served, so no stored object
// becomes unreadable.
func expectStorageVersionPlan(ctx context.Context, g Gomega) {
	for _, name := range crdNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		var storage string
		served := map[string]bool{}
		for _, version := range crd.Spec.Versions {
			if version.Storage {
				storage = version.Name
			}
			served[version.Name] = version.Served
		}
		g.Expect(storage).To(Equal(embedopsv1.GroupVersion.Version), "%s: the storage version", name)
		g.Expect(crd.Status.StoredVersions).To(Equal([]string{embedopsv1.GroupVersion.Version}), "%s: status.storedVersions", name)
		for _, stored := range crd.Status.StoredVersions {
			g.Expect(served[stored]).To(BeTrue(), "%s: stored version %s is not served", name, stored)
		}
	}
}
