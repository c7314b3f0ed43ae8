package gitops

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/chart"
)

// gitRepositoryForChart names the GitRepository holding the chart.
const gitRepositoryForChart = "embedops"

// TestHelmControllerInstallsTheChart installs charts/embedops, committed
// to the git server, with Flux's helm-controller and gitops/flux-helm's
// HelmRelease: the release is Ready at the commit once every object the
// chart renders exists, the controller Deployment rolled out in the
// namespace the chart created (Pod Security restricted enforced); deleting
// the HelmRelease uninstalls all of it but the CRDs.
func TestHelmControllerInstallsTheChart(t *testing.T) {
	namespace := cluster.Namespace(t)
	target := namespace + "-system"
	startHelmController(t)
	repo := newRepository(t, "platform/"+namespace+"-chart.git")
	commit := repo.commit(t, "Add the embedops chart", chartFiles(t))
	hr := shippedHelmRelease(t, namespace, target, gitRepositoryForChart)
	objects := renderedBy(t, hr, target)
	g := NewWithT(t)
	g.Expect(cluster.Client.Create(t.Context(), newGitRepository(namespace, gitRepositoryForChart, repo.url))).To(Succeed())
	g.Expect(cluster.Client.Create(t.Context(), hr)).To(Succeed())
	t.Cleanup(func() {
		// The test's context is already cancelled during cleanup.
		_ = client.IgnoreNotFound(cluster.Client.Delete(context.Background(), hr))
	})

	step(t, "installs: Ready at the commit, with every object the chart renders", func(t *testing.T) {
		expectHelmReleaseReady(t, client.ObjectKeyFromObject(hr), "0.1.0+"+commit[:12])
		g := NewWithT(t)
		for _, o := range objects {
			g.Expect(cluster.Client.Get(t.Context(), keyOf(o), objectLike(o))).To(Succeed(), o.Key())
		}
		ns := objectLike(chart.Object{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": target}})
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Name: target}, ns)).To(Succeed())
		g.Expect(ns.GetLabels()).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		deployment := objectLike(chart.Object{"apiVersion": "apps/v1", "kind": "Deployment"})
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: target, Name: "embedops-controller"}, deployment)).To(Succeed())
		available, _, _ := unstructured.NestedInt64(deployment.Object, "status", "availableReplicas")
		g.Expect(available).To(BeEquivalentTo(1), "the controller Deployment rolled out")
	})
	step(t, "uninstall removes all but the CRDs", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(cluster.Client.Delete(t.Context(), hr)).To(Succeed())
		g.Eventually(func() error {
			return cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(hr), objectLike(chart.Object{"apiVersion": hr.GetAPIVersion(), "kind": hr.GetKind()}))
		}).WithTimeout(settle).WithPolling(pollInterval).Should(Satisfy(apierrors.IsNotFound))
		for _, o := range objects {
			err := cluster.Client.Get(t.Context(), keyOf(o), objectLike(o))
			if o.Kind() == "CustomResourceDefinition" {
				g.Expect(err).NotTo(HaveOccurred(), "Helm deleted %s", o.Key())
				continue
			}
			g.Expect(goneOrGoing(err, o)).To(BeTrue(), "%s is left after the uninstall", o.Key())
		}
	})
}

// expectHelmReleaseReady waits until the HelmRelease is Ready with the
// chart at version.
func expectHelmReleaseReady(t *testing.T, key client.ObjectKey, version string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		hr := objectLike(chart.Object{"apiVersion": helmReleaseGVK.GroupVersion().String(), "kind": helmReleaseGVK.Kind})
		g.Expect(cluster.Client.Get(t.Context(), key, hr)).To(Succeed())
		conditions, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
		g.Expect(conditions).To(ContainElement(And(HaveKeyWithValue("type", "Ready"), HaveKeyWithValue("status", "True"))),
			"conditions: %v", conditions)
		revision, _, _ := unstructured.NestedString(hr.Object, "status", "lastAttemptedRevision")
		g.Expect(revision).To(Equal(version))
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
}

// renderedBy renders the chart as the HelmRelease installs it: its
// release name and values, into target.
func renderedBy(t *testing.T, hr *unstructured.Unstructured, target string) []chart.Object {
	t.Helper()
	c, err := chart.Load(diskFS(), chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	name, _, _ := unstructured.NestedString(hr.Object, "spec", "releaseName")
	values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values")
	objects, err := chart.Render(c, chart.Release{Name: name, Namespace: target, Values: values})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return objects
}

// goneOrGoing reports whether a Get of o found it deleted or being
// deleted: the namespace, and what is in it, terminate.
func goneOrGoing(getErr error, o chart.Object) bool {
	if apierrors.IsNotFound(getErr) {
		return true
	}
	if getErr != nil {
		return false
	}
	live := objectLike(o)
	return cluster.Client.Get(context.Background(), keyOf(o), live) == nil && live.GetDeletionTimestamp() != nil
}

// objectLike is an empty object of o's kind.
func objectLike(o chart.Object) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o["apiVersion"].(string))
	u.SetKind(o.Kind())
	return u
}

// keyOf is o's name and namespace.
func keyOf(o chart.Object) client.ObjectKey {
	meta := o["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	return client.ObjectKey{Namespace: ns, Name: o.Name()}
}
