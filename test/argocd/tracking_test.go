package argocd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/harness"
)

// trackingMethodKey selects how Argo CD marks what an Application synced
// (argo-cd util/settings/settings.go, settingsResourceTrackingMethodKey):
// label (v2's default) or annotation (v3's).
const trackingMethodKey = "application.resourceTrackingMethod"

// retained keeps an idle binding's claims, as a user keeps a cache to
// roll back to.
const retained = "1h"

// TestArgoCDPrunesNothingTheOperatorCreates syncs a server named like its
// Application, so that the instance label the server's children carry
// names the Application, with each tracking method, then moves its cache
// to another class: the first binding is idle with its claims kept, which
// no StatefulSet's claim templates own any more (Argo CD infers a
// StatefulSet's claims as its children: gitops-engine pkg/cache/references.go,
// isStatefulSetChild). After a hard refresh nothing the operator created is
// listed for pruning, the Application stays Synced and every claim
// survives.
func TestArgoCDPrunesNothingTheOperatorCreates(t *testing.T) {
	for _, method := range []string{"label", "annotation"} {
		t.Run(method, func(t *testing.T) {
			namespace := cluster.Namespace(t)
			setTrackingMethod(t, namespace, method)
			name := namespace
			fast := newStorageClass(t, namespace+"-fast")
			repo := newRepository(t, "platform/"+namespace+".git")
			commitA := commit(t, repo, "Serve bge-small", map[string]string{serverFile(name): serverManifest(name, harness.DefaultStorageClass, retained, "")})
			createApplication(t, name, namespace, repo.URL, serversPath)
			key := client.ObjectKey{Namespace: namespace, Name: name}
			server := expectHealthyAfterServerReady(t, name, key, syncedAt(commitA))
			if method == "annotation" {
				NewWithT(t).Expect(server.Annotations).To(HaveKey(provenance.TrackingIDAnnotation))
			}
			bindingA := expectArgoCDBinding(t, server, name, repo.URL, commitA)

			pushed := time.Now()
			commitB := commit(t, repo, "Move the cache to the fast class", map[string]string{serverFile(name): serverManifest(name, fast, retained, "")})
			annotateApplication(t, name, refreshAnnotation, "normal")
			server = expectHealthyAfterChange(t, name, key, syncedAt(commitB), pushed)
			bindingB := expectArgoCDBinding(t, server, name, repo.URL, commitB)
			expectIdle(t, bindingA)

			annotateApplication(t, name, refreshAnnotation, "hard")
			expectRefreshedWithoutPruning(t, name)
			expectClaimsKept(t, bindingA, bindingB)
			expectChildrenKept(t, namespace)
		})
	}
}

// setTrackingMethod sets argocd-cm's tracking method until the test ends,
// and waits until Argo CD syncs with it (waitForTrackingMethod).
func setTrackingMethod(t *testing.T, namespace, method string) {
	t.Helper()
	setArgoCDConfig(t, trackingMethodKey, method)
	waitForTrackingMethod(t, namespace, method)
}

// expectRefreshedWithoutPruning waits until the controller has written the
// status of the hard refresh (it removes the annotation in that write) and
// checks that the Application is Synced with nothing to prune.
func expectRefreshedWithoutPruning(t *testing.T, app string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		obj, err := getApplication(t.Context(), app)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(obj.GetAnnotations()).NotTo(HaveKey(refreshAnnotation))
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
	status, err := applicationStatus(t.Context(), app)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Sync.Status).To(Equal("Synced"))
	g.Expect(status.Resources).NotTo(BeEmpty())
	for _, r := range status.Resources {
		g.Expect(r.RequiresPruning).To(BeFalse(), "%s %s/%s is listed for pruning", r.Kind, r.Namespace, r.Name)
		g.Expect(r.Kind).To(Equal(embedopsv1.EmbeddingServerKind), "the Application lists %s %s", r.Kind, r.Name)
	}
}

// expectIdle waits until no server uses the binding any more: it keeps its
// claims for retainFor from IdleSince.
func expectIdle(t *testing.T, binding *embedopsv1.ModelCacheBinding) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		record := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(binding), record)).To(Succeed())
		g.Expect(record.Status.RequestReferences).To(BeEmpty())
		g.Expect(record.Status.IdleSince).NotTo(BeNil())
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
}

// expectClaimsKept checks that the bindings and all their claims are there
// and none is being deleted.
func expectClaimsKept(t *testing.T, bindings ...*embedopsv1.ModelCacheBinding) {
	t.Helper()
	g := NewWithT(t)
	for _, binding := range bindings {
		record := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(binding), record)).To(Succeed())
		g.Expect(record.DeletionTimestamp).To(BeNil(), "binding %s is being deleted", record.Name)
		claims := record.Spec.Resources.PersistentVolumeClaimNames
		g.Expect(claims).NotTo(BeEmpty(), "binding %s", record.Name)
		for _, claim := range claims {
			pvc := &corev1.PersistentVolumeClaim{}
			g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: record.Namespace, Name: claim}, pvc)).To(Succeed())
			g.Expect(pvc.DeletionTimestamp).To(BeNil(), "claim %s is being deleted", claim)
		}
	}
}

// expectChildrenKept checks that the server's StatefulSet and Services are
// there.
func expectChildrenKept(t *testing.T, namespace string) {
	t.Helper()
	g := NewWithT(t)
	sets := &appsv1.StatefulSetList{}
	g.Expect(cluster.Client.List(t.Context(), sets, client.InNamespace(namespace))).To(Succeed())
	g.Expect(sets.Items).NotTo(BeEmpty())
	services := &corev1.ServiceList{}
	g.Expect(cluster.Client.List(t.Context(), services, client.InNamespace(namespace))).To(Succeed())
	g.Expect(services.Items).NotTo(BeEmpty())
}
