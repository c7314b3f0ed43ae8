package controller

import (
	"context"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// withSnapshotClassName sets spec.cache.volumeSnapshotClassName.
func withSnapshotClassName(name string) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.VolumeSnapshotClassName = name }
}

// snapshotStorage creates, for this test alone, a StorageClass of a driver
// of its own and, when snapshotClass is set, a default VolumeSnapshotClass
// of that driver: classes are cluster-wide, and other tests' Auto servers
// must not see it.
func snapshotStorage(t *testing.T, g *WithT, namespace, snapshotClass string) (class, driver string) {
	t.Helper()
	class, driver = namespace+"-snap", "snapshots.embedops.dev/"+namespace
	createStorageClass(t, g, class, driver)
	if snapshotClass != "" {
		createSnapshotClass(t, g, snapshotClass, driver, true)
	}
	return class, driver
}

// createSnapshotClass creates a cluster-wide VolumeSnapshotClass.
func createSnapshotClass(t *testing.T, g *WithT, name, driver string, isDefault bool) {
	t.Helper()
	class := &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete}
	if isDefault {
		class.Annotations = map[string]string{defaultSnapshotClassAnnotation: "true"}
	}
	g.Expect(env.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
}

// expectRestore waits for the claim name, a restore of snapshot.
func expectRestore(t *testing.T, g *WithT, namespace, name, snapshot string) *corev1.PersistentVolumeClaim {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, claim)
	}).Should(Succeed())
	group := snapshotv1.GroupName
	g.Expect(claim.Spec.DataSourceRef).To(Equal(&corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: snapshot}))
	return claim
}

// TestAScaleUpRestoresTheBindingsSnapshotAndItGoesWithTheBinding starts
// from a one-replica Auto server whose claim is populated, on a class whose
// driver has a VolumeSnapshotClass, and scales it to three. embedops
// records one VolumeSnapshot of the populated claim on the binding, takes
// it (controlled by the binding), and both new claims restore it. The
// snapshot never becomes ready: the restore that bound stays, the one
// handed to its provisioner and unbound past the deadline is deleted and
// its replica downloads, saying the snapshot was not ready. When the
// server goes and the binding retires, its claims and its snapshot are
// deleted.
func TestAScaleUpRestoresTheBindingsSnapshotAndItGoesWithTheBinding(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	class, _ := snapshotStorage(t, g, namespace, namespace+"-default")
	clock := newTestClock(time.Now())
	startManager(t, namespace, withPopulator, withClock(clock))
	key, sts, source, binding := populatedServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithStorageClass(class), fixtures.WithRetainFor(0)))

	updateServer(t, g, key, fixtures.WithReplicas(3))
	name := decision.SnapshotName(binding.Name, commitA)
	snapshot := &snapshotv1.VolumeSnapshot{}
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, snapshot)
	}).Should(Succeed())
	g.Expect(snapshot.Spec.Source.PersistentVolumeClaimName).To(HaveValue(Equal(source)))
	g.Expect(snapshot.Spec.VolumeSnapshotClassName).To(HaveValue(Equal(namespace + "-default")))
	g.Expect(metav1.GetControllerOf(snapshot)).To(HaveField("UID", binding.UID))
	g.Expect(getBinding(t, g, namespace, binding.Name).Spec.Resources.VolumeSnapshotNames).To(Equal([]string{name}))

	bound := expectRestore(t, g, namespace, ordinalClaim(sts, 1), name)
	pending := expectRestore(t, g, namespace, ordinalClaim(sts, 2), name)
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.ClaimFills).To(ConsistOf(
			embedopsv1.ClaimFill{Name: bound.Name, Method: embedopsv1.ClaimFilledBySnapshot, Source: name, Commit: commitA},
			embedopsv1.ClaimFill{Name: pending.Name, Method: embedopsv1.ClaimFilledBySnapshot, Source: name, Commit: commitA}))
	}).Should(Succeed())
	expectReplicas(t, g, key, 3)
	bindClaim(t, g, bound)

	handToProvisioner(t, g, pending)
	why := "the restore of snapshot " + name + " was not bound within 2m0s; the snapshot is not ready to use"
	g.Eventually(func(g Gomega) {
		clock.Advance(decision.SeedDeadline)
		requestReconcile(t, newG(t), key)
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.ClaimFills).To(ContainElement(embedopsv1.ClaimFill{
			Name: pending.Name, Method: embedopsv1.ClaimFilledByDownload, Source: name, Commit: commitA, Fallback: why}))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, key.Name, SeedFallbackReason)).To(ContainElement(HaveField("Message", ContainSubstring(why))))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) bool { return claimsGone(t, g, namespace, []string{pending.Name}) }).Should(BeTrue(), "an unbound restore holds nothing")
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(bound), &corev1.PersistentVolumeClaim{})).To(Succeed())
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(snapshot), &snapshotv1.VolumeSnapshot{})).To(Succeed(), "the snapshot is the binding's until it retires")

	// The server goes; envtest runs no garbage collector, so the test
	// deletes its StatefulSet and pod, as kube-controller-manager would.
	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, key))).To(Succeed())
	g.Expect(client.IgnoreNotFound(env.Client.Delete(t.Context(), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sts.Name}}))).To(Succeed())
	g.Expect(client.IgnoreNotFound(env.Client.DeleteAllOf(t.Context(), &corev1.Pod{}, client.InNamespace(namespace), client.GracePeriodSeconds(0)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		live := getBinding(t, g, namespace, binding.Name)
		claimsGone(t, g, namespace, live.Spec.Resources.PersistentVolumeClaimNames)
		g.Expect(live.Status.Phase).To(Equal(embedopsv1.BindingReleased))
	}).Should(Succeed())
	g.Expect(isNotFound(t, &snapshotv1.VolumeSnapshot{}, client.ObjectKeyFromObject(snapshot))()).To(BeTrue(), "released with the claims")
	g.Expect(eventsAbout(t, g, namespace, binding.Name, corev1.EventTypeNormal, embedopsv1.SnapshotDeletedReason)).To(HaveLen(1))
}

// TestASnapshotClassOfAnotherDriverIsRefusedAndReplicasDownload: a server
// naming a VolumeSnapshotClass of another driver scales from one populated
// replica to two. No snapshot is taken and no claim is made for the new
// ordinal; the binding records a download with the reason, a Warning event
// says it, and the populated claim is untouched.
func TestASnapshotClassOfAnotherDriverIsRefusedAndReplicasDownload(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	class, driver := snapshotStorage(t, g, namespace, "")
	createSnapshotClass(t, g, namespace+"-other", "other.embedops.dev", false)
	startManager(t, namespace, withPopulator)
	key, sts, source, binding := populatedServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithStorageClass(class),
		withSeed(embedopsv1.CacheSeedSnapshot), withSnapshotClassName(namespace+"-other")))

	updateServer(t, g, key, fixtures.WithReplicas(2))
	why := "spec.cache.volumeSnapshotClassName " + namespace + "-other is of driver other.embedops.dev, the claims' is " + driver
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.ClaimFills).To(ConsistOf(embedopsv1.ClaimFill{
			Name: ordinalClaim(sts, 1), Method: embedopsv1.ClaimFilledByDownload, Commit: commitA, Fallback: why}))
		g.Expect(warningEvents(t, g, namespace, key.Name, SeedFallbackReason)).To(ContainElement(HaveField("Message", ContainSubstring(why))))
	}).Should(Succeed())
	expectReplicas(t, g, key, 2)
	var snapshots snapshotv1.VolumeSnapshotList
	g.Expect(env.Client.List(t.Context(), &snapshots, client.InNamespace(namespace))).To(Succeed())
	g.Expect(snapshots.Items).To(BeEmpty())
	g.Expect(isNotFound(t, &corev1.PersistentVolumeClaim{}, types.NamespacedName{Namespace: namespace, Name: ordinalClaim(sts, 1)})()).To(BeTrue(),
		"the StatefulSet creates the claim, empty, for its populator")
	kept := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: source}, kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil())
}

// TestSnapshotIsTakenAsSoonAsTheFirstReplicaIsPopulated: a one-replica
// server with seed Snapshot gets its binding's snapshot once its claim is
// populated, before any scale-up, so a scale-up restores a snapshot that
// is ready (decision's tests: Auto takes none ahead).
func TestSnapshotIsTakenAsSoonAsTheFirstReplicaIsPopulated(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	class, _ := snapshotStorage(t, g, namespace, namespace+"-default")
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithStorageClass(class), withSeed(embedopsv1.CacheSeedSnapshot)))
	completeResolveJob(t, g, namespace)
	sts := waitForStatefulSet(t, g, key)
	source := populatedReplica(t, g, key, sts)
	binding := waitForBinding(t, g, key, "")
	name := decision.SnapshotName(binding.Name, commitA)
	snapshot := &snapshotv1.VolumeSnapshot{}
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, snapshot)
	}).Should(Succeed())
	g.Expect(snapshot.Spec.Source.PersistentVolumeClaimName).To(HaveValue(Equal(source)))
	g.Expect(getBinding(t, g, namespace, binding.Name).Spec.Resources.VolumeSnapshotNames).To(Equal([]string{name}))
	g.Expect(getBinding(t, g, namespace, binding.Name).Status.ClaimFills).To(BeEmpty(), "no claim was copied")
	expectReplicas(t, g, key, 1)
}

// TestACopyAsksForAtLeastItsSourcesSize: external-provisioner refuses a
// clone smaller than its source's capacity and a restore smaller than the
// snapshot's restoreSize; a source grown by hand past the binding's size
// is copied whole with a larger request, and one smaller keeps the
// template's.
func TestACopyAsksForAtLeastItsSourcesSize(t *testing.T) {
	g := NewWithT(t)
	write := &seedWrite{template: corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
	}}}
	grown := copyClaim(write, "ns", decision.SeedClone{Name: "c-1", Source: "c-0", Method: embedopsv1.ClaimFilledByClone}, resource.MustParse("12Gi"))
	g.Expect(grown.Spec.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceStorage, resource.MustParse("12Gi")))
	g.Expect(write.template.Spec.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceStorage, resource.MustParse("10Gi")), "the template is not changed")
	smaller := copyClaim(write, "ns", decision.SeedClone{Name: "c-1", Source: "snap", Method: embedopsv1.ClaimFilledBySnapshot}, resource.MustParse("1Gi"))
	g.Expect(smaller.Spec.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceStorage, resource.MustParse("10Gi")))
	g.Expect(smaller.Spec.DataSourceRef).To(HaveField("Kind", "VolumeSnapshot"))
	unknown := copyClaim(write, "ns", decision.SeedClone{Name: "c-1", Source: "c-0", Method: embedopsv1.ClaimFilledByClone}, resource.Quantity{})
	g.Expect(unknown.Spec.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceStorage, resource.MustParse("10Gi")))
}
