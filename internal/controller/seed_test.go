package controller

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// withSeed sets spec.cache.seed.
func withSeed(seed embedopsv1.CacheSeed) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Seed = seed }
}

// ordinalClaim is the name of the claim the StatefulSet's template gives
// ordinal.
func ordinalClaim(sts *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", sts.Spec.VolumeClaimTemplates[0].Name, sts.Name, ordinal)
}

// populatedReplica plays the StatefulSet controller, the provisioner and
// the kubelet for ordinal 0: its claim exists, bound, and its pod's
// populate init container reported commitA and digestA from it.
func populatedReplica(t *testing.T, g *WithT, key types.NamespacedName, sts *appsv1.StatefulSet) string {
	t.Helper()
	const ordinal = 0
	template := sts.Spec.VolumeClaimTemplates[0]
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: ordinalClaim(sts, ordinal), Labels: template.Labels},
		Spec:       template.Spec,
	}
	g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
	bindClaim(t, g, claim)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: fmt.Sprintf("%s-%d", sts.Name, ordinal), Labels: sts.Spec.Template.Labels},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: builder.PopulateContainerName, Image: "embedops-controller:test"}},
			Containers:     []corev1.Container{{Name: builder.ContainerName, Image: "tei:test"}},
			Volumes: []corev1.Volume{{Name: template.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
			}}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), pod)).To(Succeed())
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{populated(commitA, digestA)}}
	g.Expect(env.Client.Status().Update(t.Context(), pod)).To(Succeed())
	return claim.Name
}

// populatedServer creates a one-replica server, completes its resolve Job
// and plays ordinal 0 populated (populatedReplica), and returns the
// server's key, its StatefulSet, the populated claim and the binding once
// it recorded the pod's digest.
func populatedServer(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) (types.NamespacedName, *appsv1.StatefulSet, string, *embedopsv1.ModelCacheBinding) {
	t.Helper()
	key := createServer(t, g, server)
	completeResolveJob(t, g, server.Namespace)
	sts := waitForStatefulSet(t, g, key)
	source := populatedReplica(t, g, key, sts)
	binding := waitForBinding(t, g, key, "")
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, server.Namespace, binding.Name).Status.Realized).To(HaveField("ContentDigest", digestA))
	}).Should(Succeed())
	return key, sts, source, binding
}

// bindClaim plays the volume controller: the claim is Bound.
func bindClaim(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		live := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(claim), live)).To(Succeed())
		live.Status.Phase = corev1.ClaimBound
		g.Expect(env.Client.Status().Update(t.Context(), live)).To(Succeed())
	}).Should(Succeed())
}

// handToProvisioner plays kube-controller-manager's PV controller handing
// the claim to its external provisioner.
func handToProvisioner(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"volume.kubernetes.io/storage-provisioner":"test-provisioner.embedops.dev"}}}`)
	g.Expect(env.Client.Patch(t.Context(), claim, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// expectClone waits for the claim name, a clone of source.
func expectClone(t *testing.T, g *WithT, namespace, name, source string) *corev1.PersistentVolumeClaim {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, claim)
	}).Should(Succeed())
	g.Expect(claim.Spec.DataSourceRef).To(Equal(&corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: source}))
	g.Expect(claim.Spec.DataSource).To(Equal(&corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}), "the API server fills dataSource in")
	return claim
}

// TestAScaleUpClonesAPopulatedClaimAndFallsBackWhenACloneNeverBinds
// starts from a one-replica server whose claim is populated and scales it
// to three on a class whose driver makes one clone and never the other
// (a clone Pending for ever, as with a driver without cloning). Both new
// claims are clones of the populated one, recorded on the binding. While
// the unbound one waits for a node (not handed to its provisioner) it is
// kept past the deadline; once handed over and unbound past the deadline
// it is deleted (it holds nothing), its replica downloads, and the binding
// and a Warning event say why. The bound clone and the source are never
// touched.
func TestAScaleUpClonesAPopulatedClaimAndFallsBackWhenACloneNeverBinds(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	clock := newTestClock(time.Now())
	startManager(t, namespace, withPopulator, withClock(clock))
	key, sts, source, binding := populatedServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))

	updateServer(t, g, key, fixtures.WithReplicas(3))
	bound := expectClone(t, g, namespace, ordinalClaim(sts, 1), source)
	g.Expect(bound.Labels).To(HaveKeyWithValue(embedopsv1.CacheBindingLabel, sts.Spec.Template.Labels[embedopsv1.CacheBindingLabel]))
	pending := expectClone(t, g, namespace, ordinalClaim(sts, 2), source)
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.ClaimFills).To(ConsistOf(
			embedopsv1.ClaimFill{Name: bound.Name, Method: embedopsv1.ClaimFilledByClone, Source: source, Commit: commitA},
			embedopsv1.ClaimFill{Name: pending.Name, Method: embedopsv1.ClaimFilledByClone, Source: source, Commit: commitA}))
		g.Expect(eventsAbout(t, g, namespace, key.Name, corev1.EventTypeNormal, SeedingReplicaReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	expectReplicas(t, g, key, 3)
	bindClaim(t, g, bound)

	clock.Advance(2 * decision.SeedDeadline)
	requestReconcile(t, g, key)
	g.Consistently(func() error {
		return env.Client.Get(t.Context(), client.ObjectKeyFromObject(pending), &corev1.PersistentVolumeClaim{})
	}, 2*time.Second).Should(Succeed(), "a clone not handed to its provisioner (its pod waits for a node) is not late")

	handToProvisioner(t, g, pending)
	g.Eventually(func(g Gomega) {
		// The clock starts when the controller first sees the claim handed
		// over; each round moves it past the deadline once more.
		clock.Advance(decision.SeedDeadline)
		requestReconcile(t, newG(t), key)
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.ClaimFills).To(ContainElement(HaveField("Fallback", Not(BeEmpty()))))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.ClaimFills).To(ContainElement(embedopsv1.ClaimFill{
			Name: pending.Name, Method: embedopsv1.ClaimFilledByDownload, Source: source, Commit: commitA,
			Fallback: "the clone of claim " + source + " was not bound within 2m0s"}))
		g.Expect(warningEvents(t, g, namespace, key.Name, SeedFallbackReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) bool { return claimsGone(t, g, namespace, []string{pending.Name}) }).Should(BeTrue(), "an unbound clone holds nothing")
	for _, kept := range []string{source, bound.Name} {
		g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: kept}, &corev1.PersistentVolumeClaim{})).To(Succeed(), kept)
	}

	requestReconcile(t, g, key)
	g.Consistently(isNotFound(t, &corev1.PersistentVolumeClaim{}, client.ObjectKeyFromObject(pending)), 2*time.Second).Should(BeTrue(),
		"Auto does not clone the claim again: its replica downloads")
}

// TestCloneHoldsANewServersReplicasUntilTheFirstIsPopulated: a new
// three-replica server with seed Clone starts one replica; once its claim
// is populated the other two claims are clones of it and the StatefulSet
// goes to three.
func TestCloneHoldsANewServersReplicasUntilTheFirstIsPopulated(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(3), withSeed(embedopsv1.CacheSeedClone)))
	completeResolveJob(t, g, namespace)
	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Spec.Replicas).To(HaveValue(Equal(int32(1))), "held until the first replica is populated")
	g.Eventually(func(g Gomega) {
		held := eventsAbout(t, g, namespace, key.Name, corev1.EventTypeNormal, HoldingReplicasReason)
		g.Expect(held).To(HaveLen(1))
		g.Expect(held[0].Message).To(Equal("Replicas 1 to 2 start once a claim is populated, as copies of it (spec.cache.seed Clone); 1 of 3 meanwhile"))
	}).Should(Succeed())

	source := populatedReplica(t, g, key, sts)
	expectClone(t, g, namespace, ordinalClaim(sts, 1), source)
	expectClone(t, g, namespace, ordinalClaim(sts, 2), source)
	expectReplicas(t, g, key, 3)
}

// expectReplicas waits for the StatefulSet key to ask for replicas.
func expectReplicas(t *testing.T, g *WithT, key types.NamespacedName, replicas int32) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		live := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(t.Context(), key, live)).To(Succeed())
		g.Expect(live.Spec.Replicas).To(HaveValue(Equal(replicas)))
	}).Should(Succeed())
}

// TestDownloadNeverClones: seed Download scales up with empty claims.
func TestDownloadNeverClones(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", withSeed(embedopsv1.CacheSeedDownload)))
	completeResolveJob(t, g, namespace)
	sts := waitForStatefulSet(t, g, key)
	populatedReplica(t, g, key, sts)
	updateServer(t, g, key, fixtures.WithReplicas(2))
	expectReplicas(t, g, key, 2)
	g.Consistently(isNotFound(t, &corev1.PersistentVolumeClaim{}, types.NamespacedName{Namespace: namespace, Name: ordinalClaim(sts, 1)}), 2*time.Second).Should(BeTrue())
}
