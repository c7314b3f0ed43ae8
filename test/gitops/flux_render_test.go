package gitops

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// substitutedServer leaves its class to a post-build variable, its size to
// a variable's default and its retention to the Kustomization's patch.
const substitutedServer = `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: ` + serverName + `
spec:
  model:
    name: BAAI/bge-small-en-v1.5
  cache:
    storageClassName: ${CLASS}
    size: ${SIZE:=1Gi}
    retainFor: 0s
`

// retainPatch is a JSON6902 patch of the Kustomization.
const retainPatch = "- op: replace\n  path: /spec/cache/retainFor\n  value: 30m\n"

// TestFluxRenderSettingsAreRecordedAndAudited has the real
// kustomize-controller apply a server through targetNamespace, a JSON6902
// patch and a post-build substitution; the binding records those settings
// and `embedops audit` re-renders them, verifying the decision and naming
// its origin commit.
func TestFluxRenderSettingsAreRecordedAndAudited(t *testing.T) {
	namespace := cluster.Namespace(t)
	repo := newRepository(t, "render/"+namespace+".git")
	repo.commit(t, "Describe the platform repository", map[string]string{"README.md": "# Platform\n"})
	commitA := repo.commit(t, "Serve bge with substituted settings", map[string]string{serverFile: substitutedServer})
	createRenderedFluxObjects(t, namespace, repo.url)

	var binding string
	step(t, "kustomize-controller applies the server with its settings", func(t *testing.T) {
		server := expectAppliedAfterServerReady(t, namespace, commitA, true)
		binding = expectFluxBinding(t, server, repo.url, commitA, harness.DefaultStorageClass)
		g := NewWithT(t)
		recorded := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: binding}, recorded)).To(Succeed())
		g.Expect(recorded.Spec.Decision.RetainFor.Duration).To(Equal(30*time.Minute), "the patch reached the server")
		g.Expect(recorded.Spec.Decision.Size.String()).To(Equal("1Gi"), "the variable's default reached the server")
		g.Expect(recorded.Spec.Source.Render).NotTo(BeNil())
		g.Expect(recorded.Spec.Source.Render.Spec).To(And(ContainSubstring(`"targetNamespace"`), ContainSubstring(`"patches"`), ContainSubstring(`"postBuild"`)))
		g.Expect(conditionReasons(server)).To(HaveKeyWithValue(embedopsv1.SourceResolvedCondition, embedopsv1.SourceResolvedReason))
	})
	step(t, "an unrelated commit keeps the decision", func(t *testing.T) {
		commitB := repo.commit(t, "Document the platform", map[string]string{"README.md": "# Platform\n\nServers.\n"})
		expectAppliedAfterServerReady(t, namespace, commitB, false)
	})
	step(t, "audit re-renders the settings and finds the origin", func(t *testing.T) {
		expectAudited(t, namespace, []origin{{binding: binding, commit: commitA, subject: "Serve bge with substituted settings"}})
	})
}

// createRenderedFluxObjects creates the GitRepository and a Kustomization
// with a JSON6902 patch and a post-build substitution.
func createRenderedFluxObjects(t *testing.T, namespace, url string) {
	t.Helper()
	g := NewWithT(t)
	exprs, err := shippedHealthCheckExprs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Client.Create(t.Context(), newGitRepository(namespace, gitRepositoryName, url))).To(Succeed())
	ks := newKustomization(namespace, gitRepositoryName, exprs)
	g.Expect(unstructured.SetNestedSlice(ks.Object, []any{
		map[string]any{"patch": retainPatch, "target": map[string]any{"kind": embedopsv1.EmbeddingServerKind}},
	}, "spec", "patches")).To(Succeed())
	g.Expect(unstructured.SetNestedStringMap(ks.Object, map[string]string{"CLASS": harness.DefaultStorageClass},
		"spec", "postBuild", "substitute")).To(Succeed())
	g.Expect(cluster.Client.Create(t.Context(), ks)).To(Succeed())
}

// conditionReasons maps a server's condition types to their reasons.
func conditionReasons(server *embedopsv1.EmbeddingServer) map[string]string {
	reasons := map[string]string{}
	for _, c := range server.Status.Conditions {
		reasons[c.Type] = c.Reason
	}
	return reasons
}
