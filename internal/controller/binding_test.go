package controller

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestSharedServersShareOneBindingAndOneClaim(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	first := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", fixtures.WithCacheMode(embedopsv1.CacheModeShared)))
	second := createServer(t, g, fixtures.EmbeddingServer(namespace, "b", fixtures.WithCacheMode(embedopsv1.CacheModeShared)))

	binding := waitForBinding(t, g, first, "")
	g.Expect(waitForBinding(t, g, second, "").Name).To(Equal(binding.Name))
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, binding.Name)
		g.Expect(b.Status.RequestReferences).To(HaveLen(2))
		g.Expect(b.Spec.Resources.PersistentVolumeClaimNames).To(Equal([]string{binding.Name}))
		var claims corev1.PersistentVolumeClaimList
		g.Expect(env.Client.List(t.Context(), &claims, client.InNamespace(namespace))).To(Succeed())
		g.Expect(claims.Items).To(HaveLen(1))
		claim := claims.Items[0]
		g.Expect(claim.Name).To(Equal(binding.Name))
		g.Expect(claim.Spec.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}))
		g.Expect(claim.Labels).To(HaveKeyWithValue(embedopsv1.NamespaceLabel, namespace))
		owner := metav1.GetControllerOf(&claim)
		g.Expect(owner).NotTo(BeNil())
		g.Expect(owner.UID).To(Equal(b.UID))
	}).Should(Succeed())
	waitForCondition(t, g, first, embedopsv1.CacheReadyCondition, metav1.ConditionFalse, embedopsv1.PendingReason)
	sts := waitForStatefulSet(t, g, first)
	g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", binding.Name)))

	g.Expect(env.Client.Delete(t.Context(), getServer(t, g, first))).To(Succeed())
	g.Eventually(isNotFound(t, &embedopsv1.EmbeddingServer{}, first)).Should(BeTrue())
	b := getBinding(t, g, namespace, binding.Name)
	g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(b.Status.RequestReferences).To(ConsistOf(HaveField("Name", "b")))
	g.Expect(b.Status.IdleSince).To(BeNil())
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: binding.Name}, &corev1.PersistentVolumeClaim{})).To(Succeed())
}

func TestCacheModeNoneHasNoBinding(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	playStatefulSetController(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithRetainFor(time.Hour)))
	binding := waitForBinding(t, g, key, "")

	updateServer(t, g, key, fixtures.WithCacheMode(embedopsv1.CacheModeNone), func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.RetainFor = nil })
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
		g.Expect(server.Status.CacheBinding).To(BeEmpty())
		g.Expect(server.Status.Conditions).NotTo(ContainElement(HaveField("Type", embedopsv1.CacheReadyCondition)))
		g.Expect(getBinding(t, g, namespace, binding.Name).Status.RequestReferences).To(BeEmpty())
	}).Should(Succeed())
	g.Expect(listBindings(t, g, namespace)).To(HaveLen(1))
}

func TestRestartBetweenCreateAndReferenceLeavesOneBinding(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2)))
	server := getServer(t, g, key)
	d := decisionOf(t, server)

	// A controller that stopped right after creating the binding, before
	// it referenced it.
	created := builder.Binding(server, d, decision.BindingName(d), embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: metav1.Now()})
	g.Expect(env.Client.Create(t.Context(), created)).To(Succeed())

	startManager(t, namespace)
	g.Eventually(func(g Gomega) {
		bindings := listBindings(t, g, namespace)
		g.Expect(bindings).To(HaveLen(1))
		g.Expect(bindings[0].Name).To(Equal(created.Name))
		g.Expect(bindings[0].Status.RequestReferences).To(ConsistOf(HaveField("UID", server.UID)))
		g.Expect(getServer(t, g, key).Status.CacheBinding).To(Equal(created.Name))
	}).Should(Succeed())
	requestReconcile(t, g, key)
	bindings := listBindings(t, g, namespace)
	g.Expect(bindings).To(HaveLen(1))
	g.Expect(bindings[0].Status.RequestReferences).To(HaveLen(1))
	g.Expect(bindings[0].Status.Phase).To(Equal(embedopsv1.BindingActive))
}

func TestDecisionSourceIsRecordedAndTold(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	commit := "0123456789abcdef0123456789abcdef01234567"
	declared := fixtures.EmbeddingServer(namespace, "declared")
	declared.Annotations = map[string]string{embedopsv1.SourceRevisionAnnotation: "main@sha1:" + commit}
	declaredKey := createServer(t, g, declared)
	unknownKey := createServer(t, g, fixtures.EmbeddingServer(namespace, "unknown"))

	g.Expect(waitForBinding(t, g, declaredKey, "").Spec.Source.Commit).To(Equal(commit))
	g.Expect(waitForBinding(t, g, unknownKey, "").Spec.Source.Method).To(Equal(embedopsv1.SourceUnknown))
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "unknown", embedopsv1.SourceUnknownReason)).To(HaveLen(1))
		var events corev1.EventList
		g.Expect(env.Client.List(t.Context(), &events, client.InNamespace(namespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("InvolvedObject.Kind", embedopsv1.ModelCacheBindingKind), HaveField("Reason", embedopsv1.CreatedReason),
			HaveField("Message", ContainSubstring("main@sha1:"+commit)))), "the binding's Created event carries the revision")
		g.Expect(events.Items).NotTo(ContainElement(And(HaveField("InvolvedObject.Name", "declared"), HaveField("Type", corev1.EventTypeNormal),
			HaveField("Reason", Not(Equal(embedopsv1.AvailableReason))))), "a known source costs the server no event of its own")
	}).Should(Succeed())
	g.Expect(conditions.GetMessage(getServer(t, g, declaredKey), embedopsv1.SourceResolvedCondition)).To(ContainSubstring("main@sha1:"+commit),
		"the server's condition carries the revision")
}

// TestMalformedDeclaredRevisionKeepsServing: a provenance problem is
// recorded and reported, never a reason to stall the server.
func TestMalformedDeclaredRevisionKeepsServing(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	server := fixtures.EmbeddingServer(namespace, "tei")
	server.Annotations = map[string]string{embedopsv1.SourceRevisionAnnotation: "main"}
	key := createServer(t, g, server)
	binding := waitForBinding(t, g, key, "")
	g.Expect(binding.Spec.Source.Method).To(Equal(embedopsv1.SourceDeclared))
	g.Expect(binding.Spec.Source.Revision).To(Equal("main"))
	g.Expect(binding.Spec.Source.Commit).To(BeEmpty())
	resolved := waitForCondition(t, g, key, embedopsv1.SourceResolvedCondition, metav1.ConditionFalse, embedopsv1.InvalidRevisionReason)
	g.Expect(conditions.IsStalled(resolved)).To(BeFalse(), "a provenance problem never stalls the server")
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.InvalidRevisionReason)).To(HaveLen(1))
	}).Should(Succeed())
}
