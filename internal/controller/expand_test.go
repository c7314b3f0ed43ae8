package controller

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestSizeIncreaseExpandsTheClaimsInPlace(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	class := namespace + "-expandable"
	createExpandableStorageClass(t, g, class)
	playStatefulSetController(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2),
		fixtures.WithStorageClass(class), fixtures.WithCacheSize("10Gi"), fixtures.WithRetainFor(time.Hour)))
	first := waitForBinding(t, g, key, "")
	sts := waitForStatefulSet(t, g, key)
	claims := createTemplateClaims(t, g, sts, true)
	g.Expect(claims).To(ConsistOf(first.Spec.Resources.PersistentVolumeClaimNames))

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	second := waitForBinding(t, g, key, first.Name)
	g.Expect(second.Spec.Supersedes).To(Equal(first.Name), "the larger size takes over the claims")
	g.Expect(decision.StorageName(second)).To(Equal(decision.StorageName(first)))
	g.Expect(second.Spec.Decision.Size.String()).To(Equal("20Gi"))
	g.Eventually(func(g Gomega) {
		for _, name := range claims {
			claim := &corev1.PersistentVolumeClaim{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, claim)).To(Succeed())
			g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("20Gi"), "claim %s is expanded in place", name)
		}
		g.Expect(getBinding(t, g, namespace, first.Name).Status.Phase).To(Equal(embedopsv1.BindingReleased), "superseded, deleting nothing")
	}).Should(Succeed())
	g.Expect(eventsAbout(t, g, namespace, second.Name, corev1.EventTypeNormal, embedopsv1.ClaimExpandingReason)).To(HaveLen(len(claims)))
	g.Consistently(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(1), "no new StatefulSet, no new volume")
		g.Expect(sets[0].UID).To(Equal(sts.UID))
		g.Expect(sets[0].Generation).To(Equal(sts.Generation), "the pods are not restarted")
	}).Should(Succeed())
}

// createExpandableStorageClass makes a StorageClass that allows volume
// expansion, deleted when the test ends.
func createExpandableStorageClass(t *testing.T, g *WithT, name string) {
	t.Helper()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/expandable", AllowVolumeExpansion: new(true)}
	g.Expect(env.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
}

// createTemplateClaims plays the StatefulSet controller: the claims of each
// replica from the StatefulSet's claim templates
// (<template>-<statefulset>-<ordinal>, with the template's labels), and
// when bound the PersistentVolume controller too. It returns their names.
func createTemplateClaims(t *testing.T, g *WithT, sts *appsv1.StatefulSet, bound bool) []string {
	t.Helper()
	var names []string
	for _, template := range sts.Spec.VolumeClaimTemplates {
		for i := range replicasOf(sts) {
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: fmt.Sprintf("%s-%s-%d", template.Name, sts.Name, i), Labels: maps.Clone(template.Labels)},
				Spec:       *template.Spec.DeepCopy(),
			}
			g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
			names = append(names, claim.Name)
		}
	}
	if bound {
		bindClaims(t, g, sts.Namespace, names)
	}
	return names
}

// bindClaims plays the PersistentVolume controller: the claims are Bound,
// with the capacity they request.
func bindClaims(t *testing.T, g *WithT, namespace string, names []string) {
	t.Helper()
	for _, name := range names {
		claim := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, claim)).To(Succeed())
		claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]}}
		g.Expect(env.Client.Status().Update(t.Context(), claim)).To(Succeed())
	}
}

func TestRevisionChangeRollsThePodsOnTheirOwnClaims(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	playStatefulSetController(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(3),
		fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithRetainFor(time.Hour)))
	first := waitForBinding(t, g, key, "")
	recordRealized(t, g, first, 1<<30)
	sts := waitForStatefulSet(t, g, key)

	updateServer(t, g, key, fixtures.WithModel(fixtures.Model, "v2"))
	second := waitForBinding(t, g, key, first.Name)
	g.Expect(second.Spec.Supersedes).To(Equal(first.Name), "the new revision takes over the claims: only changed files are fetched")
	g.Expect(second.Spec.Identity.Revision).To(Equal("v2"))
	g.Expect(second.Spec.Resources.PersistentVolumeClaimNames).To(Equal(first.Spec.Resources.PersistentVolumeClaimNames))
	g.Eventually(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(1), "no new StatefulSet, no new volume")
		g.Expect(sets[0].UID).To(Equal(sts.UID))
		g.Expect(sets[0].Spec.VolumeClaimTemplates).To(Equal(sts.Spec.VolumeClaimTemplates))
		g.Expect(teiContainer(&sets[0].Spec.Template).Args).To(ContainElement("--revision=v2"), "the pods roll in place, one at a time")
		g.Expect(getBinding(t, g, namespace, first.Name).Status.Phase).To(Equal(embedopsv1.BindingReleased))
	}).Should(Succeed())
}

func TestRevisionChangeOfASingleReplicaSurgesOntoNewClaims(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	playStatefulSetController(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithRetainFor(time.Hour)))
	first := waitForBinding(t, g, key, "")
	updateServer(t, g, key, fixtures.WithModel(fixtures.Model, "v2"))
	second := waitForBinding(t, g, key, first.Name)
	g.Expect(second.Spec.Supersedes).To(BeEmpty(), "one replica cannot go down: it gets new storage beside the old")
	g.Expect(second.Spec.Resources.StatefulSetName).To(Equal(decision.RolloutStatefulSetName("tei", second.Name)))
}

func TestServerCacheReadyFollowsItsBindingWithoutATimer(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	// No progress requeue within the test: only a watch can wake the server.
	startManager(t, namespace, func(opts *ManagerOptions) { opts.EmbeddingServer.ProgressInterval = time.Hour })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	binding := waitForBinding(t, g, key, "")
	claims := createTemplateClaims(t, g, waitForStatefulSet(t, g, key), false)
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(conditions.IsFalse(server, embedopsv1.CacheReadyCondition)).To(BeTrue())
		g.Expect(conditions.GetMessage(server, embedopsv1.CacheReadyCondition)).To(ContainSubstring("0/1 claims bound"))
	}).Should(Succeed())

	// The PersistentVolume controller binds the claim: only the claim
	// changes, then the binding's Ready, which the server watches.
	bindClaims(t, g, namespace, claims)
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(getBinding(t, g, namespace, binding.Name), embedopsv1.ReadyCondition)).To(BeTrue())
		g.Expect(conditions.IsTrue(getServer(t, g, key), embedopsv1.CacheReadyCondition)).To(BeTrue(), "CacheReady follows the binding")
	}).Should(Succeed())
}

// recordRealized plays the populator: the binding records a model of bytes.
func recordRealized(t *testing.T, g *WithT, binding *embedopsv1.ModelCacheBinding, bytes int64) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, binding.Namespace, binding.Name)
		b.Status.Realized = &embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, Bytes: new(bytes)}
		g.Expect(env.Client.Status().Update(t.Context(), b)).To(Succeed())
	}).Should(Succeed())
}

// A resize in progress is in the binding's Ready message, so its end wakes
// the servers using the binding: their CacheReady stops saying "expanding"
// without a timer.
func TestServerCacheReadyFollowsAResizeToItsEnd(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	// No progress requeue within the test: only a watch can wake the server.
	startManager(t, namespace, func(opts *ManagerOptions) { opts.EmbeddingServer.ProgressInterval = time.Hour })
	class := namespace + "-expandable"
	createExpandableStorageClass(t, g, class)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithStorageClass(class),
		fixtures.WithCacheSize("10Gi"), fixtures.WithRetainFor(time.Hour)))
	first := waitForBinding(t, g, key, "")
	claims := createTemplateClaims(t, g, waitForStatefulSet(t, g, key), true)

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	second := waitForBinding(t, g, key, first.Name)
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.GetMessage(getBinding(t, g, namespace, second.Name), embedopsv1.ReadyCondition)).To(Equal("1/1 claims bound; 1 expanding in place to 20Gi"))
		g.Expect(conditions.GetMessage(getServer(t, g, key), embedopsv1.CacheReadyCondition)).To(ContainSubstring("expanding in place to 20Gi"))
	}).Should(Succeed())

	// The resizer and the kubelet report the new capacity.
	bindClaims(t, g, namespace, claims)
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.GetMessage(getBinding(t, g, namespace, second.Name), embedopsv1.ReadyCondition)).To(Equal("1/1 claims bound"))
		g.Expect(conditions.GetMessage(getServer(t, g, key), embedopsv1.CacheReadyCondition)).NotTo(ContainSubstring("expanding"))
	}).Should(Succeed())
}
