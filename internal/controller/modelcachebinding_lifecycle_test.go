package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestDeletedBindingThatNothingReferencesReleasesAtOnce(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithRetainFor(24*time.Hour)))
	binding := waitForBinding(t, g, key, "")
	claims := binding.Spec.Resources.PersistentVolumeClaimNames
	createClaims(t, g, namespace, "tei", claims)
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.GetReason(getBinding(t, g, namespace, binding.Name), embedopsv1.ReadyCondition)).To(Equal(embedopsv1.PendingReason))
	}).Should(Succeed())

	// kubectl delete of a binding in use waits for its server to leave it.
	g.Expect(env.Client.Delete(t.Context(), binding)).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.Phase).To(Equal(embedopsv1.BindingActive))
	}).Should(Succeed())

	// Once the server is gone, nothing references it: a day of retainFor
	// does not hold the deletion.
	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, key))).To(Succeed())
	g.Eventually(func(g Gomega) {
		claimsGone(t, g, namespace, claims)
		err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(binding), &embedopsv1.ModelCacheBinding{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the deleted binding is gone")
	}).Should(Succeed())
	g.Expect(claimsGone(t, g, namespace, claims)).To(BeTrue())
	g.Expect(bindingEventReasons(t, g, namespace, binding.Name)).To(ContainElements(
		embedopsv1.CreatedReason, embedopsv1.RetiringReason, embedopsv1.ClaimDeletedReason, embedopsv1.ReleasedReason))
}

func TestReleaseLeavesClaimsThatAreNotTheBindings(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, binding, claims := twoReplicasRetainedForNothing(t, g, namespace)
	createClaims(t, g, namespace, "tei", claims[:1])
	// Someone else's claim under the second name: no owner, no embedops label.
	foreign := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: claims[1], Labels: map[string]string{"team": "other"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), foreign)).To(Succeed())

	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, key))).To(Succeed())
	g.Eventually(func(g Gomega) {
		claimsGone(t, g, namespace, claims[:1])
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.Phase).To(Equal(embedopsv1.BindingReleased))
	}).Should(Succeed())
	g.Expect(claimsGone(t, g, namespace, claims[:1])).To(BeTrue(), "the binding's own claim is released")
	kept := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil(), "a claim that is not the binding's is never deleted")
	g.Expect(warningEvents(t, g, namespace, binding.Name, embedopsv1.ClaimNotOwnedReason)).NotTo(BeEmpty())
}

func TestDeletedStorageClassIsDrift(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: namespace + "-gone"}, Provisioner: "example.com/gone"}
	g.Expect(env.Client.Create(t.Context(), class)).To(Succeed())
	startManager(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithStorageClass(class.Name)))
	binding := waitForBinding(t, g, key, "")
	g.Expect(binding.Spec.Decision.Provisioner).To(Equal("example.com/gone"))

	g.Expect(env.Client.Delete(t.Context(), class)).To(Succeed())
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, binding.Name)
		g.Expect(conditions.IsTrue(b, embedopsv1.ConfigurationDriftCondition)).To(BeTrue())
		g.Expect(conditions.GetReason(b, embedopsv1.ConfigurationDriftCondition)).To(Equal(embedopsv1.StorageClassDeletedReason))
		g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingActive), "drift never retires a binding")
		g.Expect(warningEvents(t, g, namespace, binding.Name, embedopsv1.StorageClassDeletedReason)).To(HaveLen(1))
	}).Should(Succeed())
}

func TestBindingHistoryLimitKeepsTheNewestReleased(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	playStatefulSetController(t, namespace)
	startManager(t, namespace, func(opts *ManagerOptions) { opts.ModelCacheBinding.HistoryLimit = 2 })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithRetainFor(0), fixtures.WithCacheSize("1Gi")))
	var used []string
	previous := waitForBinding(t, g, key, "").Name
	for _, size := range []string{"2Gi", "3Gi", "4Gi", "5Gi"} {
		updateServer(t, g, key, fixtures.WithCacheSize(size))
		next := waitForBinding(t, g, key, previous).Name
		// Each change rolls out before the next, so the bindings are
		// Released in the order they were used: a change made during a
		// rollout drains the older StatefulSets together, in an order of
		// their own.
		g.Eventually(func(g Gomega) {
			b := &embedopsv1.ModelCacheBinding{}
			err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: previous}, b)
			if apierrors.IsNotFound(err) {
				return // Released and already pruned
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingReleased))
		}).Should(Succeed())
		used = append(used, previous)
		previous = next
	}
	current := getBinding(t, g, namespace, previous)
	g.Eventually(func(g Gomega) {
		var released, described []string
		for _, b := range listBindings(t, g, namespace) {
			if b.Status.Phase == embedopsv1.BindingReleased {
				released = append(released, b.Name)
				described = append(described, fmt.Sprintf("%s released at %s, resourceVersion %s", b.Name, b.Status.ReleasedAt, b.ResourceVersion))
			}
		}
		g.Expect(released).To(ConsistOf(used[2], used[3]), "the two newest records are kept; used in order: %v; released: %v", used, described)
	}).Should(Succeed())
	g.Expect(getBinding(t, g, namespace, current.Name).Status.Phase).To(Equal(embedopsv1.BindingActive))
	for _, pruned := range used[:2] {
		g.Eventually(func(g Gomega) {
			g.Expect(bindingEventReasons(t, g, namespace, pruned)).To(ContainElement(embedopsv1.PrunedReason))
		}).Should(Succeed())
	}
}

// bindingEventReasons lists the reasons of the events about a binding.
func bindingEventReasons(t *testing.T, g Gomega, namespace, name string) []string {
	t.Helper()
	var events corev1.EventList
	g.Expect(env.Client.List(t.Context(), &events, client.InNamespace(namespace))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == embedopsv1.ModelCacheBindingKind && e.InvolvedObject.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// TestARetiringBindingWaitsForThePodsThatMountItsClaims deletes a server
// while a pod the server does not know (a user's, no embedops labels)
// mounts one of its claims: the binding deletes the other claim, says
// which pod it waits for, and deletes the held claim once that pod is gone.
func TestARetiringBindingWaitsForThePodsThatMountItsClaims(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, binding, claims := twoReplicasRetainedForNothing(t, g, namespace)
	createClaims(t, g, namespace, "tei", claims)
	debug := createPodMounting(t, g, namespace, "debug", claims[0])

	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, key))).To(Succeed())
	waitForRetiringOn(t, g, namespace, binding.Name, fmt.Sprintf("claim %s is deleted once pod debug is gone", claims[0]))
	g.Eventually(func(g Gomega) {
		g.Expect(claimsGone(t, g, namespace, claims[1:])).To(BeTrue())
	}).Should(Succeed(), "a claim no pod names is deleted")
	expectClaimKept(t, g, namespace, claims[0])
	waiting := getBinding(t, g, namespace, binding.Name).ResourceVersion
	g.Consistently(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).ResourceVersion).To(Equal(waiting))
	}).Should(Succeed(), "looking again at the same wait writes nothing")

	g.Expect(env.Client.Delete(t.Context(), debug)).To(Succeed())
	waitForReleased(t, g, namespace, binding.Name, claims)
}

// TestAReleasedBindingDeletesItsClaimsMadeAgain starts from a retired,
// Released binding whose claims exist again, as the StatefulSet controller
// makes them from a StatefulSet its cache still holds after the binding saw
// it gone, one mounted by that StatefulSet's pod: the binding deletes the
// free claim, keeps the mounted one until its pod is gone, then deletes it,
// and stays Released.
func TestAReleasedBindingDeletesItsClaimsMadeAgain(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key, binding, claims := twoReplicasRetainedForNothing(t, g, namespace)
	sts := waitForStatefulSet(t, g, key)
	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, key))).To(Succeed())
	waitForReleased(t, g, namespace, binding.Name, claims)
	released := getBinding(t, g, namespace, binding.Name)
	deletedBefore := len(eventsAbout(t, g, namespace, binding.Name, corev1.EventTypeNormal, embedopsv1.ClaimDeletedReason))

	stale := createPodMounting(t, g, namespace, "tei-1", claims[1])
	g.Expect(createTemplateClaims(t, g, sts, false)).To(Equal(claims))
	g.Eventually(func(g Gomega) {
		g.Expect(claimsGone(t, g, namespace, claims[:1])).To(BeTrue())
	}).Should(Succeed(), "a claim made again after the release is deleted")
	expectClaimKept(t, g, namespace, claims[1])

	g.Expect(env.Client.Delete(t.Context(), stale)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(claimsGone(t, g, namespace, claims[1:])).To(BeTrue())
	}).Should(Succeed(), "the mounted one once its pod is gone")
	g.Expect(eventsAbout(t, g, namespace, binding.Name, corev1.EventTypeNormal, embedopsv1.ClaimDeletedReason)).To(HaveLen(deletedBefore + 2))
	after := getBinding(t, g, namespace, binding.Name)
	g.Expect(after.Status.Phase).To(Equal(embedopsv1.BindingReleased))
	g.Expect(after.Status.ReleasedAt).To(Equal(released.Status.ReleasedAt), "the release stays as it was recorded")
}

// TestARetiringSharedBindingDeletesItsPopulateJob retires a Shared binding
// whose populate Job finished: the Job goes with the retirement, and the
// claim once the Job's pod, which the garbage collector deletes in a
// cluster, is gone too.
func TestARetiringSharedBindingDeletesItsPopulateJob(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithRetainFor(0)))
	bindingName := cacheBindingOfJob(t, g, namespace)
	job := populateJobOf(t, g, namespace, bindingName)
	completeJob(t, g, job, populated(commitA, digestA))
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionTrue, embedopsv1.DownloadedReason)
	claims := getBinding(t, g, namespace, bindingName).Spec.Resources.PersistentVolumeClaimNames
	g.Expect(claims).To(HaveLen(1))

	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, key))).To(Succeed())
	pod := job.Name + "-x"
	waitForRetiringOn(t, g, namespace, bindingName, fmt.Sprintf("claim %s is deleted once pod %s is gone", claims[0], pod))
	g.Eventually(isNotFound(t, job, client.ObjectKeyFromObject(job))).Should(BeTrue(), "the populate Job is deleted when its binding retires")
	expectClaimKept(t, g, namespace, claims[0])

	g.Expect(env.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: pod}})).To(Succeed())
	waitForReleased(t, g, namespace, bindingName, claims)
}

// waitForRetiringOn waits until the binding is Retiring and its Ready and
// Reconciling messages end with wait.
func waitForRetiringOn(t *testing.T, g *WithT, namespace, name, wait string) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		retiring := getBinding(t, g, namespace, name)
		g.Expect(retiring.Status.Phase).To(Equal(embedopsv1.BindingRetiring))
		g.Expect(conditions.GetMessage(retiring, embedopsv1.ReadyCondition)).To(HaveSuffix(wait))
		g.Expect(conditions.GetMessage(retiring, embedopsv1.ReconcilingCondition)).To(HaveSuffix(wait))
	}).Should(Succeed())
}

// expectClaimKept checks that the claim exists and is not being deleted.
func expectClaimKept(t *testing.T, g *WithT, namespace, name string) {
	t.Helper()
	held := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, held)).To(Succeed())
	g.Expect(held.DeletionTimestamp).To(BeNil(), "a claim a pod names is not deleted")
}

// waitForReleased waits until the claims are gone and the binding is
// Released.
func waitForReleased(t *testing.T, g *WithT, namespace, name string, claims []string) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		g.Expect(claimsGone(t, g, namespace, claims)).To(BeTrue())
		g.Expect(getBinding(t, g, namespace, name).Status.Phase).To(Equal(embedopsv1.BindingReleased))
	}).Should(Succeed())
}

// createPodMounting creates an unscheduled pod, Running by its status,
// that mounts claim.
func createPodMounting(t *testing.T, g *WithT, namespace, name, claim string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "shell", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), pod)).To(Succeed())
	pod.Status.Phase = corev1.PodRunning
	g.Expect(env.Client.Status().Update(t.Context(), pod)).To(Succeed())
	return pod
}

// twoReplicasRetainedForNothing creates server tei with two replicas and
// retainFor 0s, and returns it with its binding and the binding's two
// claim names.
func twoReplicasRetainedForNothing(t *testing.T, g *WithT, namespace string) (types.NamespacedName, *embedopsv1.ModelCacheBinding, []string) {
	t.Helper()
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2), fixtures.WithRetainFor(0)))
	binding := waitForBinding(t, g, key, "")
	claims := binding.Spec.Resources.PersistentVolumeClaimNames
	g.Expect(claims).To(HaveLen(2))
	return key, binding, claims
}
