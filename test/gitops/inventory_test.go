package gitops

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// inventoryKinds reads the group/kind of every object the Kustomization
// in namespace lists in status.inventory: what kustomize-controller
// applied, and the only objects whose health it checks (kustomize-controller
// internal/controller/kustomization_controller.go, checkHealth, waits on
// the change set of its apply; entry ids are
// <namespace>_<name>_<group>_<kind>).
func inventoryKinds(t *testing.T, namespace string) map[string]bool {
	t.Helper()
	g := NewWithT(t)
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	g.Expect(cluster.Client.Get(t.Context(), kustomizationKey(namespace), ks)).To(Succeed())
	entries, _, err := unstructured.NestedSlice(ks.Object, "status", "inventory", "entries")
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]bool{}
	for _, e := range entries {
		id, _ := e.(map[string]any)["id"].(string)
		parts := strings.Split(id, "_")
		g.Expect(parts).To(HaveLen(4), "inventory id %q", id)
		kinds[parts[2]+"/"+parts[3]] = true
	}
	return kinds
}

// expectHealthChecksOnlyForApplied checks that every kind the shipped
// healthCheckExprs name is one the Kustomization applied, so that
// kustomize-controller evaluates them: the server's binding exists, but
// the controller created it, so it is in no Kustomization's inventory.
func expectHealthChecksOnlyForApplied(t *testing.T, server *embedopsv1.EmbeddingServer) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(server.Status.CacheBinding).NotTo(BeEmpty(), "the server has a binding")
	kinds := inventoryKinds(t, server.Namespace)
	g.Expect(kinds).To(HaveKey(embedopsv1.GroupVersion.Group + "/" + embedopsv1.EmbeddingServerKind))
	g.Expect(kinds).NotTo(HaveKey(embedopsv1.GroupVersion.Group+"/"+embedopsv1.ModelCacheBindingKind),
		"a binding is in the inventory")
	exprs, err := shippedHealthCheckExprs()
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range exprs {
		expr := e.(map[string]any)
		group := strings.Split(expr["apiVersion"].(string), "/")[0]
		g.Expect(kinds).To(HaveKey(group+"/"+expr["kind"].(string)),
			"config/flux has healthCheckExprs for %s, which kustomize-controller never applies, so never evaluates", expr["kind"])
	}
}
