package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestStatusURLEndsInTheConfiguredClusterDomain(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, func(opts *ManagerOptions) { opts.EmbeddingServer.ClusterDomain = "corp.example." })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithPort(9000)))

	g.Eventually(func(g Gomega) {
		g.Expect(getServer(t, g, key).Status.URL).To(Equal("http://tei." + namespace + ".svc.corp.example:9000"))
	}).Should(Succeed())
}

func TestServerAppliesOwnedLabelledChildrenAndRecordsThem(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))

	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	server := waitForPhase(t, g, key, embedopsv1.PhasePending)
	// The status is patched in two steps, conditions first: wait for the rest.
	g.Eventually(func(g Gomega) {
		server = getServer(t, g, key)
		g.Expect(server.Status.Inventory).NotTo(BeNil())
	}).Should(Succeed())
	children := []struct {
		obj  client.Object
		name string
	}{
		{&appsv1.StatefulSet{}, "tei"},
		{&corev1.Service{}, "tei"},
		{&corev1.Service{}, "tei-pods"},
	}
	for _, child := range children {
		g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: child.name}, child.obj)).To(Succeed())
		g.Expect(child.obj.GetLabels()).To(HaveKeyWithValue(embedopsv1.NameLabel, "tei"))
		g.Expect(child.obj.GetLabels()).To(HaveKeyWithValue(embedopsv1.NamespaceLabel, namespace))
		owner := metav1.GetControllerOf(child.obj)
		g.Expect(owner).NotTo(BeNil(), "%T %s has no controller", child.obj, child.name)
		g.Expect(owner.UID).To(Equal(server.UID))
		g.Expect(owner.Kind).To(Equal(embedopsv1.EmbeddingServerKind))
		g.Expect(owner.BlockOwnerDeletion).To(HaveValue(BeTrue()))
	}
	g.Expect(server.Finalizers).To(ContainElement(embedopsv1.ServerFinalizer))
	g.Expect(server.Status.Inventory).NotTo(BeNil())
	g.Expect(server.Status.Inventory.Entries).To(Equal([]embedopsv1.ResourceRef{
		{ID: namespace + "_tei-pods__Service", Version: "v1"},
		{ID: namespace + "_tei__Service", Version: "v1"},
		{ID: namespace + "_tei_apps_StatefulSet", Version: "v1"},
	}))
	g.Expect(server.Status.URL).To(Equal("http://tei." + namespace + ".svc.cluster.local:8080"))
	g.Expect(server.Status.EndpointCheck).To(Equal(embedopsv1.EndpointCheckDisabled))
	g.Expect(conditions.IsTrue(server, embedopsv1.ReconcilingCondition)).To(BeTrue())
	g.Expect(conditions.IsTrue(server, embedopsv1.AcceptedCondition)).To(BeTrue())
	checkConditions(t, g, key)
}

func TestServerIsReadyWhenAllReplicasAreReady(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2)))

	server := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(HavePrefix("0/2 replicas ready"))
	checkConditions(t, g, key)

	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	server = waitForPhase(t, g, key, embedopsv1.PhaseReady)
	g.Expect(server.Status.Replicas).To(Equal(int32(2)))
	g.Expect(server.Status.ReadyReplicas).To(Equal(int32(2)))
	g.Expect(conditions.Has(server, embedopsv1.ReconcilingCondition)).To(BeFalse())
	g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	checkConditions(t, g, key)
}

func TestServerScaledToZeroIsReady(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "idle", fixtures.WithReplicas(0)))

	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.ScaledToZeroReason)
	server := waitForPhase(t, g, key, embedopsv1.PhaseScaledToZero)
	g.Expect(server.Status.Replicas).To(BeZero())
	g.Expect(waitForStatefulSet(t, g, key).Spec.Replicas).To(HaveValue(BeZero()))
	checkConditions(t, g, key)
}

func TestServerSetsBackHandEditedChildren(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	sts := waitForStatefulSet(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)

	// Someone edits the Service's port, as kubectl edit would.
	service := &corev1.Service{}
	g.Expect(env.Client.Get(t.Context(), key, service)).To(Succeed())
	edit := client.MergeFrom(service.DeepCopy())
	service.Spec.Ports[0].Port = 9999
	g.Expect(env.Client.Patch(t.Context(), service, edit, client.FieldOwner("kubectl-edit"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), key, service)).To(Succeed())
		g.Expect(service.Spec.Ports).To(HaveLen(2), "http and TEI's metrics")
		g.Expect(service.Spec.Ports[0].Port).To(Equal(int32(8080)))
	}).Should(Succeed())

	// And the StatefulSet's image.
	editedSts := sts.DeepCopy()
	editSts := client.MergeFrom(sts.DeepCopy())
	editedSts.Spec.Template.Spec.Containers[0].Image = "example.invalid/other:1"
	g.Expect(env.Client.Patch(t.Context(), editedSts, editSts, client.FieldOwner("kubectl-edit"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), key, editedSts)).To(Succeed())
		g.Expect(editedSts.Spec.Template.Spec.Containers[0].Image).To(Equal(embedopsv1.DefaultImage))
	}).Should(Succeed())
	g.Expect(editedSts.UID).To(Equal(sts.UID), "a mutable field is set back in place")
	checkConditions(t, g, key)
}

func TestNewClaimTemplateGetsAStatefulSetBesideTheServingOne(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	before := waitForStatefulSet(t, g, key)
	g.Expect(before.Spec.VolumeClaimTemplates).To(HaveLen(1))

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	g.Eventually(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(2))
		g.Expect(sets[0].UID).To(Equal(before.UID), "the serving StatefulSet is neither replaced nor changed")
		g.Expect(sets[0].Spec.VolumeClaimTemplates).To(Equal(before.Spec.VolumeClaimTemplates))
		after := sets[1]
		g.Expect(after.Spec.VolumeClaimTemplates).To(HaveLen(1))
		claim := after.Spec.VolumeClaimTemplates[0]
		g.Expect(claim.Name).NotTo(Equal(before.Spec.VolumeClaimTemplates[0].Name), "the template name carries the decision digest")
		g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("20Gi"))
	}).Should(Succeed())
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	checkConditions(t, g, key)
}

func TestServerDeletionRemovesChildrenButNotClaims(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	sts := waitForStatefulSet(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)

	// The claim the StatefulSet controller would have made for pod tei-0.
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      sts.Spec.VolumeClaimTemplates[0].Name + "-tei-0",
			Labels:    sts.Spec.VolumeClaimTemplates[0].Labels,
		},
		Spec: sts.Spec.VolumeClaimTemplates[0].Spec,
	}
	g.Expect(claim.Labels).To(HaveKeyWithValue(embedopsv1.NameLabel, "tei"))
	g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())

	g.Expect(env.Client.Delete(t.Context(), fixtures.EmbeddingServer(namespace, "tei"))).To(Succeed())
	g.Eventually(isNotFound(t, &embedopsv1.EmbeddingServer{}, key)).Should(BeTrue())
	g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue())
	g.Expect(isNotFound(t, &corev1.Service{}, key)()).To(BeTrue())
	g.Expect(isNotFound(t, &corev1.Service{}, types.NamespacedName{Namespace: namespace, Name: "tei-pods"})()).To(BeTrue())
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	g.Expect(claim.DeletionTimestamp).To(BeNil())
}

func TestServerPrunesStaleInventoryEntriesButNotClaims(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	waitForPhase(t, g, key, embedopsv1.PhasePending)
	// Settle: a reconcile started before the first status patch would write
	// the inventory over the entries added below.
	server := requestReconcile(t, g, key)
	applied := server.Status.Inventory.Entries

	// Children an earlier version of the controller applied.
	labels := map[string]string{embedopsv1.NameLabel: "tei", embedopsv1.NamespaceLabel: namespace}
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "stale", Labels: labels}}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cache", Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: server.Spec.Cache.Size.DeepCopy()}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), stale)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
	g.Eventually(func() error {
		server := getServer(t, g, key)
		patch := client.MergeFrom(server.DeepCopy())
		server.Status.Inventory.Entries = append(server.Status.Inventory.Entries,
			embedopsv1.ResourceRef{ID: namespace + "_stale__ConfigMap", Version: "v1"},
			embedopsv1.ResourceRef{ID: namespace + "_cache__PersistentVolumeClaim", Version: "v1"})
		return env.Client.Status().Patch(t.Context(), server, patch)
	}).Should(Succeed())

	server = requestReconcile(t, g, key)
	g.Expect(server.Status.Inventory.Entries).To(Equal(applied))
	g.Expect(isNotFound(t, &corev1.ConfigMap{}, client.ObjectKeyFromObject(stale))()).To(BeTrue())
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	g.Expect(claim.DeletionTimestamp).To(BeNil())
}

func TestServerWritesNothingAtRest(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	// With the endpoint check on, rechecks of /info write nothing either.
	writes := startManager(t, namespace, withEndpointCheck(newTEIStandIn(t)))
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	g.Eventually(func(g Gomega) { g.Expect(getServer(t, g, key).Status.Served).NotTo(BeNil()) }).Should(Succeed())
	requestReconcile(t, g, key) // settles any reconcile still in flight

	before := writes.snapshot()
	const requests = 10
	for range requests {
		server := requestReconcile(t, g, key)
		g.Expect(server.Status.Phase).To(Equal(embedopsv1.PhaseReady))
	}
	delta := writes.since(before)
	t.Logf("writes at rest: %v", delta)
	for _, resource := range []string{"statefulsets", "services", "persistentvolumeclaims", "embeddingservers",
		"modelcachebindings", "modelcachebindings/status", "events"} {
		g.Expect(delta).NotTo(HaveKey(resource), "the controller wrote %s at rest", resource)
	}
	g.Expect(delta["embeddingservers/status"]).To(BeNumerically("<=", requests), "more than one status patch per reconcile request")
	checkConditions(t, g, key)
}

func TestServerSuspendedIsLeftAlone(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithSuspend(true)))

	g.Consistently(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(server.Status.Conditions).To(BeEmpty())
		g.Expect(server.Finalizers).To(BeEmpty())
		g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue())
	}).Should(Succeed())

	updateServer(t, g, key, fixtures.WithSuspend(false))
	waitForStatefulSet(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
}

// Argo CD deletes an Application's resources with Foreground propagation
// and Flux prunes with Background: either way the server's children go, its
// own finalizer goes with a patch of that one entry, and another
// controller's finalizer and foregroundDeletion stay; the API server
// refuses none of the controller's writes but a status patch's Conflict,
// which the patcher answers by merging into the latest copy (the deletion
// itself changed the server since the reconcile read it). envtest runs no garbage
// collector, so foregroundDeletion is still there at the end.
func TestServerDeletedByEitherCascadeKeepsOtherFinalizers(t *testing.T) {
	for _, propagation := range []metav1.DeletionPropagation{metav1.DeletePropagationForeground, metav1.DeletePropagationBackground} {
		t.Run(string(propagation), func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			namespace := harness.Namespace(t, env.Client)
			writes := startManager(t, namespace)
			key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
			waitForStatefulSet(t, g, key)
			waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
			server := getServer(t, g, key)
			setFinalizers(t, g, server, append(server.Finalizers, foreignFinalizer)...)

			g.Expect(env.Client.Delete(t.Context(), server, client.PropagationPolicy(propagation))).To(Succeed())
			want := []string{foreignFinalizer}
			if propagation == metav1.DeletePropagationForeground {
				want = append(want, metav1.FinalizerDeleteDependents)
			}
			g.Eventually(func(g Gomega) {
				g.Expect(getServer(t, g, key).Finalizers).To(Equal(want))
			}).Should(Succeed())
			g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue())
			g.Expect(isNotFound(t, &corev1.Service{}, key)()).To(BeTrue())
			for _, refused := range writes.refusedWrites() {
				g.Expect(refused).To(And(ContainSubstring("/status "), HaveSuffix(" 409")))
			}
			setFinalizers(t, g, server)
			g.Eventually(isNotFound(t, &embedopsv1.EmbeddingServer{}, key)).Should(BeTrue())
		})
	}
}
