package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// createStorageClass creates a cluster-wide StorageClass for the test.
func createStorageClass(t *testing.T, g *WithT, name, provisioner string) {
	t.Helper()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, Parameters: map[string]string{"type": name}}
	g.Expect(env.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
}

// getBinding reads a binding.
func getBinding(t *testing.T, g Gomega, namespace, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := &embedopsv1.ModelCacheBinding{}
	g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, binding)).To(Succeed())
	return binding
}

// listBindings lists the bindings of a namespace.
func listBindings(t *testing.T, g Gomega, namespace string) []embedopsv1.ModelCacheBinding {
	t.Helper()
	var bindings embedopsv1.ModelCacheBindingList
	g.Expect(env.Client.List(t.Context(), &bindings, client.InNamespace(namespace))).To(Succeed())
	return bindings.Items
}

// waitForBinding waits until the server uses a binding that references it,
// and returns the binding.
func waitForBinding(t *testing.T, g *WithT, key types.NamespacedName, not string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var binding *embedopsv1.ModelCacheBinding
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())
		g.Expect(server.Status.CacheBinding).NotTo(Equal(not))
		binding = getBinding(t, g, key.Namespace, server.Status.CacheBinding)
		g.Expect(decision.HasReference(binding, server.UID)).To(BeTrue(), "%+v", binding.Status.RequestReferences)
	}).Should(Succeed())
	return binding
}

// createClaims plays the StatefulSet controller: it creates the claims with
// the server's labels.
func createClaims(t *testing.T, g *WithT, namespace, server string, names []string) {
	t.Helper()
	for _, name := range names {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
				embedopsv1.NameLabel: server, embedopsv1.NamespaceLabel: namespace,
			}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			},
		}
		g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
	}
}

// claimsGone plays the claim-protection controller, which envtest does not
// run, for claims being deleted, and reports whether all names are gone.
func claimsGone(t *testing.T, g Gomega, namespace string, names []string) bool {
	t.Helper()
	gone := true
	for _, name := range names {
		claim := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		gone = false
		if !claim.DeletionTimestamp.IsZero() && len(claim.Finalizers) > 0 {
			claim.Finalizers = nil
			g.Expect(client.IgnoreNotFound(env.Client.Update(t.Context(), claim))).To(Succeed())
		}
	}
	return gone
}

func TestStorageClassChangeRetiresTheOldBindingAfterRetainFor(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	playStatefulSetController(t, namespace)
	createStorageClass(t, g, namespace+"-fast", "example.com/fast")
	createStorageClass(t, g, namespace+"-slow", "example.com/slow")
	startManager(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2), fixtures.WithRetainFor(time.Second), fixtures.WithStorageClass(namespace+"-fast")))

	old := waitForBinding(t, g, key, "")
	g.Expect(old.Spec.Decision.Provisioner).To(Equal("example.com/fast"))
	g.Expect(old.Spec.Source.Method).To(Equal(embedopsv1.SourceUnknown))
	g.Expect(old.Finalizers).To(ContainElement(embedopsv1.CacheProtectionFinalizer))
	claims := old.Spec.Resources.PersistentVolumeClaimNames
	g.Expect(claims).To(HaveLen(2))
	createClaims(t, g, namespace, "tei", claims)

	updateServer(t, g, key, fixtures.WithStorageClass(namespace+"-slow"))
	current := waitForBinding(t, g, key, old.Name)
	g.Expect(current.Spec.Decision.StorageClassName).To(Equal(namespace + "-slow"))

	g.Eventually(func(g Gomega) {
		gone := claimsGone(t, g, namespace, claims)
		b := getBinding(t, g, namespace, old.Name)
		g.Expect(b.Status.RequestReferences).To(BeEmpty())
		g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingReleased), "idle since %v", b.Status.IdleSince)
		g.Expect(gone).To(BeTrue())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, old.Name)
		g.Expect(b.Status.ReleasedAt).NotTo(BeNil())
		g.Expect(b.Finalizers).To(BeEmpty(), "a Released binding stays as a record without its finalizer")
		g.Expect(b.Status.RetireAfter.Sub(b.Status.IdleSince.Time)).To(Equal(time.Second))
	}).Should(Succeed())
	g.Expect(getBinding(t, g, namespace, current.Name).Status.Phase).To(Equal(embedopsv1.BindingActive))
}

func TestRevertedDecisionReusesTheIdleBinding(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	playStatefulSetController(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithRetainFor(time.Hour), fixtures.WithStorageClass("a")))
	first := waitForBinding(t, g, key, "")

	updateServer(t, g, key, fixtures.WithStorageClass("b"))
	second := waitForBinding(t, g, key, first.Name)
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, first.Name)
		g.Expect(b.Status.RequestReferences).To(BeEmpty())
		g.Expect(b.Status.IdleSince).NotTo(BeNil())
	}).Should(Succeed())

	updateServer(t, g, key, fixtures.WithStorageClass("a"))
	reused := waitForBinding(t, g, key, second.Name)
	g.Expect(reused.Name).To(Equal(first.Name))
	g.Expect(reused.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, first.Name).Status.IdleSince).To(BeNil())
		g.Expect(getBinding(t, g, namespace, second.Name).Status.RequestReferences).To(BeEmpty())
	}).Should(Succeed())
	g.Expect(listBindings(t, g, namespace)).To(HaveLen(2))
}

func TestPerReplicaBindingTurnsReadyWhenItsClaimsBind(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	binding := waitForBinding(t, g, key, "")
	names := binding.Spec.Resources.PersistentVolumeClaimNames
	g.Expect(names).To(HaveLen(1))

	// The StatefulSet controller makes the claim from the template, with
	// its labels and no owner reference.
	template := waitForStatefulSet(t, g, key).Spec.VolumeClaimTemplates[0]
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names[0], Labels: template.Labels},
		Spec:       template.Spec,
	}
	g.Expect(claim.Labels).To(HaveKeyWithValue(embedopsv1.CacheBindingLabel, binding.Name))
	g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.Conditions).To(ContainElement(And(
			HaveField("Type", embedopsv1.ReadyCondition), HaveField("Reason", embedopsv1.PendingReason), HaveField("Message", "0/1 claims bound"))))
	}).Should(Succeed())

	// The PersistentVolume controller binds it: only the claim changes.
	claim.Status.Phase = corev1.ClaimBound
	g.Expect(env.Client.Status().Update(t.Context(), claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.Conditions).To(ContainElement(And(
			HaveField("Type", embedopsv1.ReadyCondition), HaveField("Status", metav1.ConditionTrue), HaveField("Message", "1/1 claims bound"))))
	}).Should(Succeed())
}
