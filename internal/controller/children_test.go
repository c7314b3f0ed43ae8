package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func TestServerStallsOnAnInvalidPodTemplateAndTouchesNothing(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	before := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(t.Context(), key, before)).To(Succeed())

	updateServer(t, g, key, fixtures.WithPodTemplate(`{"spec":{"containers":[{"name":"embedding","imagePullPolicy":"Always","bogusField":true}]}}`))
	server := waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.ConfigurationInvalidReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.StalledCondition)).To(ContainSubstring("invalid spec.podTemplate"))
	g.Expect(conditions.IsFalse(server, embedopsv1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.ConfigurationInvalidReason))
	g.Expect(conditions.GetReason(server, embedopsv1.AcceptedCondition)).To(Equal(embedopsv1.InvalidReason))
	server = waitForPhase(t, g, key, embedopsv1.PhaseFailed) // and observedGeneration: the stall is about this generation
	stalledSince := conditions.GetLastTransitionTime(server, embedopsv1.StalledCondition)
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ConfigurationInvalidReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	checkConditions(t, g, key)

	for range 10 {
		server := requestReconcile(t, g, key)
		g.Expect(server.Status.Phase).To(Equal(embedopsv1.PhaseFailed))
		g.Expect(conditions.GetReason(server, embedopsv1.StalledCondition)).To(Equal(embedopsv1.ConfigurationInvalidReason))
		g.Expect(conditions.GetLastTransitionTime(server, embedopsv1.StalledCondition)).To(Equal(stalledSince))
	}
	after := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(t.Context(), key, after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "nothing is applied from an invalid spec")
	checkConditions(t, g, key)

	// Fixing the manifest recovers.
	updateServer(t, g, key, func(s *embedopsv1.EmbeddingServer) { s.Spec.PodTemplate = nil })
	server = waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	waitForPhase(t, g, key, embedopsv1.PhasePending)
}

func TestServerRefusesASpecTheAPIServerRejectsWithoutDeletingTheStatefulSet(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	before := waitForStatefulSet(t, g, key)

	// Valid for the builder and the CRD schema, invalid for the Pod API:
	// requests above limits.
	updateServer(t, g, key, fixtures.WithPodTemplate(`{"spec":{"containers":[{"name":"embedding","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}]}}`))
	server := waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.ConfigurationInvalidReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.StalledCondition)).To(ContainSubstring("the API server refuses StatefulSet tei"))
	after := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(t.Context(), key, after)).To(Succeed())
	g.Expect(after.UID).To(Equal(before.UID), "an invalid spec must never delete the running StatefulSet")
	checkConditions(t, g, key)
}

func TestServerLeavesAnotherOwnersServiceAlone(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tei", Labels: map[string]string{"app": "legacy"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "legacy"},
			Ports:    []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromInt32(8000)}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), foreign)).To(Succeed())
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))

	server := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.OwnershipConflictReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring("Service " + namespace + "/tei exists and is not owned"))
	g.Expect(conditions.GetReason(server, embedopsv1.StalledCondition)).To(Equal(embedopsv1.OwnershipConflictReason))
	waitForPhase(t, g, key, embedopsv1.PhaseFailed)
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.OwnershipConflictReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	checkConditions(t, g, key)

	requestReconcile(t, g, key)
	now := &corev1.Service{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), now)).To(Succeed())
	g.Expect(now.ResourceVersion).To(Equal(foreign.ResourceVersion), "the foreign Service was changed")
	g.Expect(now.Labels).To(Equal(map[string]string{"app": "legacy"}))
	g.Expect(now.OwnerReferences).To(BeEmpty())
	g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue(), "no child is applied while one is in conflict")
	g.Expect(listBindings(t, g, namespace)).To(BeEmpty(), "no cache decision is recorded while a child is in conflict")

	// The foreign Service is not watched: the stalled server looks again
	// after its progress interval and recovers once the Service is gone.
	g.Expect(env.Client.Delete(t.Context(), foreign)).To(Succeed())
	waitForStatefulSet(t, g, key)
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
		g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.InitializingReason))
		g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())
	}).Should(Succeed())
}

func TestServerReportsFailingPods(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	sts := waitForStatefulSet(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)

	// The pod the StatefulSet controller would make, failing to pull.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tei-0", Labels: sts.Spec.Template.Labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "embedding", Image: sts.Spec.Template.Spec.Containers[0].Image,
		}}},
	}
	g.Expect(env.Client.Create(t.Context(), pod)).To(Succeed())
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:  "embedding",
			Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: "Back-off pulling image",
			}},
		}},
	}
	g.Expect(env.Client.Status().Update(t.Context(), pod)).To(Succeed())

	server := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.ImagePullBackOffReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(Equal("pod tei-0: container embedding: ImagePullBackOff: Back-off pulling image"))
	server = waitForPhase(t, g, key, embedopsv1.PhaseDegraded)
	g.Expect(conditions.IsTrue(server, embedopsv1.ReconcilingCondition)).To(BeTrue())
	// Until spec.progressDeadline a failing pull is progress: no stall and
	// no Warning yet (embeddingserver_progress_test.go).
	g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ImagePullBackOffReason)).To(BeEmpty())
	checkConditions(t, g, key)
}

func TestSSAOwnerLabelsAreEmbedopsOwnerLabels(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ownerLabels().GetOwnerLabels("tei", "models")).To(Equal(map[string]string{
		embedopsv1.NameLabel:      "tei",
		embedopsv1.NamespaceLabel: "models",
	}))
}

func TestChildObjectsAreOwnedLabelledAndWithoutStatus(t *testing.T) {
	g := NewWithT(t)
	server := fixtures.EmbeddingServer("models", "tei")
	server.UID = "u1"
	sts, err := builder.StatefulSet(server, nil, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	children, err := childObjects(server, sts, builder.Service(server), builder.HeadlessService(server))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(children).To(HaveLen(3))
	for _, child := range children {
		g.Expect(child.GetLabels()).To(HaveKeyWithValue(embedopsv1.NameLabel, "tei"))
		g.Expect(child.GetLabels()).To(HaveKeyWithValue(embedopsv1.NamespaceLabel, "models"))
		g.Expect(child.GetOwnerReferences()).To(ConsistOf(metav1.OwnerReference{
			APIVersion: "embedops.dev/v1alpha1", Kind: "EmbeddingServer", Name: "tei", UID: "u1",
			Controller: new(true), BlockOwnerDeletion: new(true),
		}))
		g.Expect(child.Object).NotTo(HaveKey("status"))
		g.Expect(child.Object["metadata"]).NotTo(HaveKey("creationTimestamp"))
	}
	g.Expect(inventoryOf(children).Entries).To(Equal([]embedopsv1.ResourceRef{
		{ID: "models_tei-pods__Service", Version: "v1"},
		{ID: "models_tei__Service", Version: "v1"},
		{ID: "models_tei_apps_StatefulSet", Version: "v1"},
	}))
}

func TestStaleEntriesAreThoseNoLongerApplied(t *testing.T) {
	a := embedopsv1.ResourceRef{ID: "models_a_apps_StatefulSet", Version: "v1"}
	b := embedopsv1.ResourceRef{ID: "models_b__Service", Version: "v1"}
	c := embedopsv1.ResourceRef{ID: "models_c_batch_Job", Version: "v1"}
	inventory := func(entries ...embedopsv1.ResourceRef) *embedopsv1.ResourceInventory {
		return &embedopsv1.ResourceInventory{Entries: entries}
	}
	cases := []struct {
		name          string
		before, after *embedopsv1.ResourceInventory
		want          []embedopsv1.ResourceRef
	}{
		{"first apply", nil, inventory(a, b), nil},
		{"unchanged", inventory(a, b), inventory(b, a), nil},
		{"one gone", inventory(a, b, c), inventory(a, b), []embedopsv1.ResourceRef{c}},
		{"new version of the same object", inventory(a), inventory(embedopsv1.ResourceRef{ID: a.ID, Version: "v2"}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(staleEntries(tc.before, tc.after)).To(Equal(tc.want))
		})
	}
}

func TestDeletableEntriesIncludeTheKnownChildren(t *testing.T) {
	g := NewWithT(t)
	server := fixtures.EmbeddingServer("models", "tei")
	known := []embedopsv1.ResourceRef{
		{ID: "models_tei-pods__Service", Version: "v1"},
		{ID: "models_tei__Service", Version: "v1"},
		{ID: "models_tei_apps_StatefulSet", Version: "v1"},
	}
	g.Expect(deletableEntries(server)).To(Equal(known), "a server deleted before its first status patch")

	job := embedopsv1.ResourceRef{ID: "models_tei-populate_batch_Job", Version: "v1"}
	server.Status.Inventory = &embedopsv1.ResourceInventory{Entries: append([]embedopsv1.ResourceRef{job}, known...)}
	g.Expect(deletableEntries(server)).To(Equal([]embedopsv1.ResourceRef{known[0], job, known[1], known[2]}))
}
