package controller

import (
	"slices"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// These tests play the StatefulSet controller, which envtest does not run:
// a StatefulSet's ready replicas are whatever the test says. The rollout
// on pods that really start is test/e2e's.

func TestStorageChangeRollsSurgeFirst(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, first := readyServerAndBinding(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(3)))

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	var second *embedopsv1.ModelCacheBinding
	g.Eventually(func(g Gomega) {
		second = bindingOtherThan(t, g, namespace, first)
		g.Expect(second.Spec.Resources.StatefulSetName).To(Equal(decision.RolloutStatefulSetName("tei", second.Name)))
	}).Should(Succeed())
	next := types.NamespacedName{Namespace: namespace, Name: second.Spec.Resources.StatefulSetName}
	g.Expect(second.Spec.Resources.PersistentVolumeClaimNames).To(HaveEach(ContainSubstring("-"+next.Name+"-")),
		"the binding lists the claims the new StatefulSet makes")

	for ready := int32(0); ready < 3; ready++ {
		g.Eventually(func(g Gomega) {
			g.Expect(replicasOf(statefulSetOf(t, g, next))).To(Equal(min(ready+1, 3)), "one new pod at a time")
			g.Expect(replicasOf(statefulSetOf(t, g, key))).To(Equal(3-ready), "an old pod goes only once a new one is ready")
			server := getServer(t, g, key)
			g.Expect(conditions.IsFalse(server, embedopsv1.ReadyCondition)).To(BeTrue())
			g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring("moving to new cache storage (size 20Gi replaces 10Gi, and the claims cannot grow in place"))
			g.Expect(getBinding(t, g, namespace, first).Status.RequestReferences).NotTo(BeEmpty(), "the old pods still mount %s", first)
		}).Should(Succeed())
		markStatefulSetReady(t, g, key)
		markStatefulSetReadyUpTo(t, g, next, ready+1)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(replicasOf(statefulSetOf(t, g, key))).To(BeZero(), "the old StatefulSet keeps no replica once every new pod serves")
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(statefulSetOf(t, g, key).DeletionTimestamp).To(BeNil(), "the old StatefulSet stays while its pods do")
	}).Should(Succeed())
	expectDrainedTo(t, g, namespace, next.Name)
	g.Expect(eventsAbout(t, g, namespace, key.Name, corev1.EventTypeNormal, embedopsv1.MovingToNewStorageReason)).To(ConsistOf(HaveField("Message",
		HavePrefix("moving 3 replicas to new volumes on StatefulSet "+next.Name+", one at a time beside the serving ones: size 20Gi replaces 10Gi, and the claims cannot grow in place"))))
	markStatefulSetReady(t, g, next)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, first).Status.RequestReferences).To(BeEmpty(), "%s is left once nothing mounts it", first)
		g.Expect(getServer(t, g, key).Status.Inventory.Entries).NotTo(ContainElement(HaveField("ID", namespace+"_tei_apps_StatefulSet")))
	}).Should(Succeed())
}

// Another object in the name a storage change would give its StatefulSet
// (another server may be named <server>-<6 hex>) is left alone: the new
// storage takes the next name.
func TestStorageChangeSkipsARolloutNameAnotherObjectHolds(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, first := readyServerAndBinding(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	larger := fixtures.EmbeddingServer(namespace, "tei", fixtures.WithCacheSize("20Gi"))
	d, err := decision.For(larger)
	g.Expect(err).NotTo(HaveOccurred())
	names := decision.RolloutStatefulSetNames("tei", decision.BindingName(d))
	foreign := foreignStatefulSet(namespace, names[0])
	g.Expect(env.Client.Create(t.Context(), foreign)).To(Succeed())

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	var second *embedopsv1.ModelCacheBinding
	g.Eventually(func(g Gomega) {
		second = bindingOtherThan(t, g, namespace, first)
		g.Expect(second.Spec.Resources.StatefulSetName).To(Equal(names[1]))
	}).Should(Succeed())
	next := types.NamespacedName{Namespace: namespace, Name: names[1]}
	markStatefulSetReady(t, g, next)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	left := statefulSetOf(t, g, client.ObjectKeyFromObject(foreign))
	g.Expect(left.Generation).To(Equal(int64(1)), "the other object's StatefulSet was never changed")
	g.Expect(left.OwnerReferences).To(BeEmpty())
}

// A Shared cache's StatefulSet, whose name no binding records, skips a
// rollout name another object holds the same way.
func TestSharedStorageChangeSkipsARolloutNameAnotherObjectHolds(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, _ := readyServerAndBinding(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	d, err := decision.For(fixtures.EmbeddingServer(namespace, "tei", fixtures.WithCacheMode(embedopsv1.CacheModeShared)))
	g.Expect(err).NotTo(HaveOccurred())
	names := decision.RolloutStatefulSetNames("tei", decision.BindingName(d))
	foreign := foreignStatefulSet(namespace, names[0])
	g.Expect(env.Client.Create(t.Context(), foreign)).To(Succeed())

	updateServer(t, g, key, fixtures.WithCacheMode(embedopsv1.CacheModeShared))
	next := types.NamespacedName{Namespace: namespace, Name: names[1]}
	g.Eventually(func(g Gomega) { g.Expect(env.Client.Get(t.Context(), next, &appsv1.StatefulSet{})).To(Succeed()) }).Should(Succeed())
	markStatefulSetReady(t, g, next)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	left := statefulSetOf(t, g, client.ObjectKeyFromObject(foreign))
	g.Expect(left.Generation).To(Equal(int64(1)), "the other object's StatefulSet was never changed")
	g.Expect(left.OwnerReferences).To(BeEmpty())
}

// foreignStatefulSet is a StatefulSet embedops does not own.
func foreignStatefulSet(namespace, name string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			},
		},
	}
}

func TestSingleReplicaStorageChangeSurgesFirst(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, first := readyServerAndBinding(t, g, fixtures.EmbeddingServer(namespace, "one"))

	updateServer(t, g, key, fixtures.WithCacheMode(embedopsv1.CacheModeShared))
	var next types.NamespacedName
	g.Eventually(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(2))
		next = types.NamespacedName{Namespace: namespace, Name: sets[1].Name}
		g.Expect(sets[0].Name).To(Equal("one"))
		g.Expect(replicasOf(&sets[0])).To(Equal(int32(1)), "the only old pod serves until the new one does")
		g.Expect(replicasOf(&sets[1])).To(Equal(int32(1)))
		g.Expect(sets[1].Spec.VolumeClaimTemplates).To(BeEmpty(), "the Shared pods mount the binding's claim")
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(replicasOf(statefulSetOf(t, g, key))).To(Equal(int32(1)))
	}).Should(Succeed())

	markStatefulSetReady(t, g, next)
	expectDrainedTo(t, g, namespace, next.Name)
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, first).Status.RequestReferences).To(BeEmpty())
	}).Should(Succeed())
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
}

func TestStorageChangeDuringARolloutDrainsBothOldStatefulSets(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2)))
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	var middle types.NamespacedName
	g.Eventually(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(2))
		middle = types.NamespacedName{Namespace: namespace, Name: sets[1].Name}
		if sets[1].Name == "tei" {
			middle.Name = sets[0].Name
		}
	}).Should(Succeed())
	markStatefulSetReadyUpTo(t, g, middle, 1)
	g.Eventually(func(g Gomega) {
		g.Expect(replicasOf(statefulSetOf(t, g, key))).To(Equal(int32(1)))
	}).Should(Succeed())

	updateServer(t, g, key, fixtures.WithCacheSize("30Gi"))
	g.Eventually(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(3), "the newest change starts its own StatefulSet; the two before it drain")
		for _, sts := range sets {
			if sts.Name != key.Name && sts.Name != middle.Name {
				g.Expect(replicasOf(&sts)).To(Equal(int32(1)))
			}
		}
	}).Should(Succeed())
	var last types.NamespacedName
	for _, sts := range statefulSetsOf(t, g, namespace) {
		if sts.Name != key.Name && sts.Name != middle.Name {
			last = client.ObjectKeyFromObject(&sts)
		}
	}
	markStatefulSetReadyUpTo(t, g, last, 1)
	g.Eventually(func(g Gomega) {
		g.Expect(replicasOf(statefulSetOf(t, g, last))).To(Equal(int32(2)))
	}).Should(Succeed())
	markStatefulSetReady(t, g, last)
	expectDrainedTo(t, g, namespace, last.Name)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
}

// expectDrainedTo waits until name is the namespace's only StatefulSet,
// playing the StatefulSet controller for the others: once one is scaled to
// zero, its pods are gone (status.replicas 0 at its generation), and only
// then does the server delete it.
func expectDrainedTo(t *testing.T, g *WithT, namespace, name string) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		for _, sts := range statefulSetsOf(t, g, namespace) {
			if sts.Name != name && replicasOf(&sts) == 0 && !podsGone(&sts) {
				sts.Status = readyStatus(&sts, 0)
				g.Expect(env.Client.Status().Update(t.Context(), &sts)).To(Succeed())
			}
		}
		g.Expect(statefulSetsOf(t, g, namespace)).To(ConsistOf(HaveField("ObjectMeta.Name", name)))
	}).Should(Succeed())
}

// markStatefulSetReadyUpTo plays the StatefulSet controller: ready of the
// StatefulSet's replicas are ready, at its current generation.
func markStatefulSetReadyUpTo(t *testing.T, g *WithT, key types.NamespacedName, ready int32) {
	t.Helper()
	setStatefulSetStatus(t, g, key, func(sts *appsv1.StatefulSet) bool {
		sts.Status = readyStatus(sts, ready)
		return true
	})
}

// statefulSetOf reads a StatefulSet.
func statefulSetOf(t *testing.T, g Gomega, key types.NamespacedName) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(t.Context(), key, sts)).To(Succeed())
	return sts
}

// statefulSetsOf lists the namespace's StatefulSets, sorted by name.
func statefulSetsOf(t *testing.T, g Gomega, namespace string) []appsv1.StatefulSet {
	t.Helper()
	var list appsv1.StatefulSetList
	g.Expect(env.Client.List(t.Context(), &list, client.InNamespace(namespace))).To(Succeed())
	slices.SortFunc(list.Items, func(a, b appsv1.StatefulSet) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// bindingOtherThan is the namespace's one binding not named name.
func bindingOtherThan(t *testing.T, g Gomega, namespace, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var list embedopsv1.ModelCacheBindingList
	g.Expect(env.Client.List(t.Context(), &list, client.InNamespace(namespace))).To(Succeed())
	var others []embedopsv1.ModelCacheBinding
	for _, b := range list.Items {
		if b.Name != name {
			others = append(others, b)
		}
	}
	g.Expect(others).To(HaveLen(1))
	return &others[0]
}

func TestNewStatefulSetsDrainAndOlderOnesAreNotRestartedForIt(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	key := types.NamespacedName{Namespace: namespace, Name: "tei"}
	// A release before the drain made the StatefulSet: this one's
	// controller makes it, stops, and the test takes the drain out, so
	// no reconcile of this release can race the edit.
	t.Run("an earlier release", func(t *testing.T) {
		g := newG(t)
		startManager(t, namespace)
		createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
		sts := waitForStatefulSet(t, g, key)
		g.Expect(teiContainer(&sts.Spec.Template).Lifecycle).To(Equal(builder.DrainLifecycle()), "a new StatefulSet drains")
	})
	var edited *appsv1.StatefulSet
	g.Eventually(func(g Gomega) {
		edited = statefulSetOf(t, g, key)
		teiContainer(&edited.Spec.Template).Lifecycle = nil
		teiContainer(&edited.Spec.Template).LivenessProbe = earlierLiveness()
		g.Expect(env.Client.Update(t.Context(), edited)).To(Succeed())
	}).Should(Succeed())

	requests := startManager(t, namespace)
	requestReconcile(t, g, key)
	// The dry run that found nothing else changing is not asked again
	// while the server and its StatefulSet stay as they are.
	asked := requests.requestSnapshot()
	requestReconcile(t, g, key)
	g.Expect(requests.requestsSince(asked)).NotTo(HaveKey("PATCH statefulsets"))
	g.Consistently(func(g Gomega) {
		live := statefulSetOf(t, g, key)
		g.Expect(live.Generation).To(Equal(edited.Generation), "the pod template is left as it is")
		g.Expect(teiContainer(&live.Spec.Template).Lifecycle).To(BeNil())
		g.Expect(teiContainer(&live.Spec.Template).LivenessProbe.HTTPGet).NotTo(BeNil(), "the earlier liveness probe stays")
	}).Should(Succeed())

	// A change that restarts the pods anyway gives them the drain and this
	// release's liveness probe (builder.LivenessProbe).
	updateServer(t, g, key, fixtures.WithEnv(corev1.EnvVar{Name: "MAX_CLIENT_BATCH_SIZE", Value: "16"}))
	g.Eventually(func(g Gomega) {
		live := statefulSetOf(t, g, key)
		g.Expect(teiContainer(&live.Spec.Template).Env).To(ContainElement(HaveField("Name", "MAX_CLIENT_BATCH_SIZE")))
		g.Expect(teiContainer(&live.Spec.Template).Lifecycle).To(Equal(builder.DrainLifecycle()), "the pods roll anyway: they drain")
		g.Expect(teiContainer(&live.Spec.Template).LivenessProbe).To(Equal(builder.LivenessProbe()))
	}).Should(Succeed())
}

// earlierLiveness is the liveness probe releases before
// builder.LivenessProbe gave TEI: an HTTP GET of /health.
func earlierLiveness() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString(builder.PortName), Scheme: corev1.URISchemeHTTP}},
		PeriodSeconds: 20, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 6,
	}
}

func TestRevertDuringARolloutServesFromTheOldStatefulSet(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2), fixtures.WithCacheSize("10Gi")))
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	g.Eventually(func(g Gomega) { g.Expect(statefulSetsOf(t, g, namespace)).To(HaveLen(2)) }).Should(Succeed())
	// Reverted before any new pod is ready: the serving StatefulSet is the
	// desired one again, unchanged, and the half-started one drains.
	updateServer(t, g, key, fixtures.WithCacheSize("10Gi"))
	expectDrainedTo(t, g, namespace, "tei")
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
}

// readyServerAndBinding creates server, plays its StatefulSet ready, waits
// until it is Ready and returns its key and its binding's name.
func readyServerAndBinding(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) (types.NamespacedName, string) {
	t.Helper()
	key := createServer(t, g, server)
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	return key, waitForBinding(t, g, key, "").Name
}

// With spec.rollout.maxSurge: 0 a one-replica server's only pod goes before
// its successor starts, which asks for no room beside it (a full GPU pool),
// and the Ready condition and the event say the server serves nothing
// meanwhile.
func TestSingleReplicaStorageChangeWithoutSurgeReplacesInPlace(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, _ := readyServerAndBinding(t, g, fixtures.EmbeddingServer(namespace, "one", fixtures.WithMaxSurge(intstr.FromInt32(0))))

	updateServer(t, g, key, fixtures.WithCacheMode(embedopsv1.CacheModeShared))
	var next types.NamespacedName
	g.Eventually(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(2))
		next = types.NamespacedName{Namespace: namespace, Name: sets[1].Name}
		g.Expect(replicasOf(&sets[0])).To(BeZero(), "the only old pod goes first")
		g.Expect(replicasOf(&sets[1])).To(Equal(int32(1)))
		ready := conditions.Get(getServer(t, g, key), embedopsv1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("in place (spec.rollout.maxSurge: 0): the only replica stops before its successor starts, so the server serves nothing until the new pod is ready"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventsAbout(t, g, namespace, key.Name, corev1.EventTypeNormal, embedopsv1.MovingToNewStorageReason)).To(ContainElement(
			HaveField("Message", And(ContainSubstring("StatefulSet one gives up 1 of its 1 replicas before StatefulSet "),
				ContainSubstring("in place (spec.rollout.maxSurge: 0): the only replica stops before its successor starts")))))
	}).Should(Succeed())

	markStatefulSetReady(t, g, next)
	expectDrainedTo(t, g, namespace, next.Name)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
}

// A surge pod with no room beside the serving one (every GPU taken) keeps
// the server waiting, which it says, naming the way out; the wait is
// progress until spec.progressDeadline, as every diagnosed wait is.
func TestASurgePodWithoutRoomNamesMaxSurgeZero(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, _ := readyServerAndBinding(t, g, fixtures.EmbeddingServer(namespace, "gpu"))

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	var next types.NamespacedName
	g.Eventually(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(2))
		for _, sts := range sets {
			if sts.Name != key.Name {
				next = client.ObjectKeyFromObject(&sts)
			}
		}
	}).Should(Succeed())
	createPodUnschedulableFor(t, g, next, "0", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		ready := conditions.Get(server, embedopsv1.ReadyCondition)
		g.Expect(ready.Reason).To(Equal(embedopsv1.UnschedulableReason))
		g.Expect(ready.Message).To(And(ContainSubstring("Insufficient nvidia.com/gpu"), ContainSubstring("set spec.rollout.maxSurge: 0 to replace the pods in place")))
		g.Expect(conditions.IsTrue(server, embedopsv1.ReconcilingCondition)).To(BeTrue(), "progress until the deadline")
		g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	}).Should(Succeed())
}
