package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
)

// TestBindingDropsTheReferencesOfServersThatAreGone checks that a
// reference nobody would remove (its server was deleted before the
// reference's removal was written) is dropped, and that the live server's
// reference is kept.
func TestBindingDropsTheReferencesOfServersThatAreGone(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	server := getServer(t, g, key)
	binding := waitForBinding(t, g, key, "")

	ghost := embedopsv1.RequestReference{Kind: embedopsv1.EmbeddingServerKind, Namespace: namespace, Name: "gone", UID: types.UID("00000000-0000-0000-0000-000000000001")}
	recreated := embedopsv1.RequestReference{Kind: embedopsv1.EmbeddingServerKind, Namespace: namespace, Name: "tei", UID: types.UID("00000000-0000-0000-0000-000000000002")}
	g.Eventually(func() error {
		current := getBinding(t, g, namespace, binding.Name)
		current.Status.RequestReferences = append(current.Status.RequestReferences, ghost, recreated)
		return env.Client.Status().Update(t.Context(), current)
	}).Should(Succeed())

	g.Eventually(func(g Gomega) {
		current := getBinding(t, g, namespace, binding.Name)
		g.Expect(current.Status.RequestReferences).To(ConsistOf(HaveField("UID", server.UID)))
		g.Expect(current.Status.Phase).To(Equal(embedopsv1.BindingActive))
	}).Should(Succeed())
	g.Expect(getServer(t, g, key).Status.CacheBinding).To(Equal(binding.Name))
}
