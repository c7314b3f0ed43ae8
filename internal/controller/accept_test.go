package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestServerWaitsForItsTokenSecretWithoutRollingOut(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	requests := startManager(t, namespace)
	const token = "hf_value_that_must_never_leak"
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "private", fixtures.WithToken("hf-token", "token")))

	server := waitForCondition(t, g, key, embedopsv1.AcceptedCondition, metav1.ConditionFalse, embedopsv1.SecretNotFoundReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.AcceptedCondition)).To(ContainSubstring("hf-token does not exist"))
	g.Expect(conditions.IsTrue(server, embedopsv1.StalledCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(server, embedopsv1.StalledCondition)).To(Equal(embedopsv1.SecretNotFoundReason))
	g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.SecretNotFoundReason))
	waitForPhase(t, g, key, embedopsv1.PhaseFailed)
	g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue(), "pods that can only fail must not be rolled out")
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "private", embedopsv1.SecretNotFoundReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	checkConditions(t, g, key)

	// A Secret without the key is not enough.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hf-token"},
		Data:       map[string][]byte{"other": []byte(token)},
	}
	g.Expect(env.Client.Create(t.Context(), secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(conditions.GetMessage(server, embedopsv1.AcceptedCondition)).To(ContainSubstring(`has no key "token"`))
	}).Should(Succeed())
	g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue())

	// Adding the key recovers the server without any change to it.
	secret.Data["token"] = []byte(token)
	g.Expect(env.Client.Update(t.Context(), secret)).To(Succeed())
	server = waitForCondition(t, g, key, embedopsv1.AcceptedCondition, metav1.ConditionTrue, embedopsv1.ValidReason)
	g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	waitForStatefulSet(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	checkConditions(t, g, key)

	var events corev1.EventList
	g.Expect(env.Client.List(t.Context(), &events)).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Message).NotTo(ContainSubstring(token))
	}
	server = getServer(t, g, key)
	for _, c := range server.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring(token))
	}
	// The Secret was found by polling it by name: Secrets are never listed
	// or watched, so no cache grows with them.
	g.Expect(requests.collectionReads("secrets")).To(BeZero(), "Secrets were listed or watched")
}
