package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// userClaim creates the claim a user filled, as a user would: no embedops
// label, no owner; then, when phase is set, plays the PV controller.
func userClaim(t *testing.T, g *WithT, namespace, name string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
	if phase != "" {
		setClaimPhase(t, g, claim, phase)
	}
	return claim
}

// setClaimPhase plays the PV controller.
func setClaimPhase(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase) {
	t.Helper()
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	claim.Status.Phase = phase
	g.Expect(env.Client.Status().Update(t.Context(), claim)).To(Succeed())
}

// waitForStall waits until the server is Stalled for reason, with Ready
// False for the same reason and a Warning event of it.
func waitForStall(t *testing.T, g *WithT, key types.NamespacedName, reason, message string) {
	t.Helper()
	server := waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, reason)
	g.Expect(conditions.GetMessage(server, embedopsv1.StalledCondition)).To(ContainSubstring(message))
	g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(reason))
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring(message))
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, key.Namespace, key.Name, reason)).NotTo(BeEmpty())
	}).Should(Succeed())
	err := env.Client.Get(t.Context(), key, &corev1.Service{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a stalled server starts nothing: %v", err)
}

func TestExistingClaimMissingThenNotBoundStallsTheServer(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "byov", fixtures.WithExistingClaim("models")))

	waitForStall(t, g, key, embedopsv1.ClaimNotFoundReason, "cache.existingClaim "+namespace+"/models does not exist")
	g.Expect(conditions.GetReason(getServer(t, g, key), embedopsv1.AcceptedCondition)).To(Equal(embedopsv1.ClaimNotFoundReason))

	claim := userClaim(t, g, namespace, "models", corev1.ClaimPending)
	waitForStall(t, g, key, embedopsv1.ClaimNotBoundReason, "cache.existingClaim "+namespace+"/models is Pending, not Bound")

	setClaimPhase(t, g, claim, corev1.ClaimBound)
	server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadingReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).To(ContainSubstring("is checking that the existing claim models holds"))
	g.Expect(conditions.IsTrue(server, embedopsv1.AcceptedCondition)).To(BeTrue())
	job := populateJobOf(t, g, namespace, cacheBindingOfJob(t, g, namespace))
	g.Expect(job.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--verify-only"))
	g.Expect(job.Spec.Template.Spec.Containers[0].Env).To(BeEmpty(), "no token and no hub")
	g.Expect(job.Spec.Template.Spec.Volumes).To(ConsistOf(HaveField("VolumeSource.PersistentVolumeClaim", &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models", ReadOnly: true})))
	checkConditions(t, g, key)
}

func TestExistingClaimWithoutTheModelStallsTheServer(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	userClaim(t, g, namespace, "models", corev1.ClaimBound)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "byov", fixtures.WithExistingClaim("models")))
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadingReason)
	bindingName := cacheBindingOfJob(t, g, namespace)
	job := populateJobOf(t, g, namespace, bindingName)

	failJob(t, g, job, terminatedPopulate(1, `{"error":"the model is not in the cache: no models--BAAI--bge-small-en-v1.5/refs/main"}`))

	waitForStall(t, g, key, embedopsv1.ModelNotInClaimReason, "the existing claim models does not hold")
	server := getServer(t, g, key)
	g.Expect(conditions.GetReason(server, embedopsv1.ModelReadyCondition)).To(Equal(embedopsv1.ModelNotInClaimReason))
	g.Expect(conditions.GetMessage(server, embedopsv1.StalledCondition)).To(ContainSubstring("no models--BAAI--bge-small-en-v1.5/refs/main"))
	g.Eventually(func(g Gomega) {
		binding := getBinding(t, g, namespace, bindingName)
		g.Expect(conditions.GetReason(binding, embedopsv1.ModelReadyCondition)).To(Equal(embedopsv1.ModelNotInClaimReason))
		g.Expect(warningEvents(t, g, namespace, bindingName, embedopsv1.ModelNotInClaimReason)).To(HaveLen(1))
	}).Should(Succeed())
	g.Expect(getBinding(t, g, namespace, bindingName).Status.Realized).To(BeNil())
	checkConditions(t, g, key)
}

func TestExistingClaimServesAndIsNeverDeleted(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	claim := userClaim(t, g, namespace, "models", corev1.ClaimBound)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "byov", fixtures.WithExistingClaim("models"),
		fixtures.WithReplicas(2), fixtures.WithRetainFor(0)))
	bindingName := cacheBindingOfJob(t, g, namespace)

	completeJob(t, g, populateJobOf(t, g, namespace, bindingName), populated(commitA, ""))

	server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionTrue, embedopsv1.DownloadedReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).To(ContainSubstring("model commit " + commitA + " is in the existing claim models"))
	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Spec.VolumeClaimTemplates).To(BeEmpty())
	g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim",
		&corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models", ReadOnly: true})))
	tei := sts.Spec.Template.Spec.Containers[0]
	g.Expect(tei.Args).To(ContainElement("--revision=main"), "hf-hub finds the snapshot through the claim's refs/main")
	g.Expect(tei.Env).NotTo(ContainElement(HaveField("Name", "HF_TOKEN")), "no token is needed")
	g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue(embedopsv1.CacheBindingLabel, bindingName))
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	server = waitForCondition(t, g, key, embedopsv1.CacheReadyCondition, metav1.ConditionTrue, embedopsv1.BoundReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.CacheReadyCondition)).To(ContainSubstring("existing claim models, which it does not own"))

	binding := getBinding(t, g, namespace, bindingName)
	g.Expect(binding.Spec.Decision.ExistingClaim).To(Equal("models"), "the binding records the claim")
	g.Expect(binding.Spec.Decision.ReclaimPolicy).To(Equal(embedopsv1.ReclaimPolicyRetain))
	g.Expect(binding.Spec.Resources.PersistentVolumeClaimNames).To(BeEmpty(), "as a claim it does not own")
	g.Expect(binding.Spec.Decision.Provisioner).To(BeEmpty(), "no StorageClass was decided")
	g.Expect(conditions.IsFalse(binding, embedopsv1.ConfigurationDriftCondition)).To(BeTrue())
	g.Expect(binding.Status.Realized).NotTo(BeNil())
	g.Expect(binding.Status.Realized.ResolvedCommit).To(Equal(commitA))
	g.Expect(conditions.GetMessage(binding, embedopsv1.ModelReadyCondition)).To(ContainSubstring("existing claim models"))

	// The last user goes, retainFor 0s passes, and the binding retires and
	// is Released; it is then deleted. None of it touches the claim.
	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, key))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, bindingName).Status.Phase).To(Equal(embedopsv1.BindingReleased))
	}).Should(Succeed())
	g.Expect(env.Client.Delete(t.Context(), getBinding(t, g, namespace, bindingName))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: bindingName}, &embedopsv1.ModelCacheBinding{}))
	}).Should(BeTrue())
	kept := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(claim), kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil(), "the user's claim is never deleted")
	g.Expect(kept.UID).To(Equal(claim.UID))
	g.Expect(kept.Labels).NotTo(HaveKey(embedopsv1.CacheBindingLabel), "nor relabelled")
	g.Expect(bindingEventReasons(t, g, namespace, bindingName)).NotTo(ContainElement(embedopsv1.ClaimDeletedReason))
}
