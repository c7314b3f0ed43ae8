package gitops

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/test/harness"
)

// TestFluxIncludeIsLaidOutAsSourceControllerDoes: the servers' overlay
// reads a base that only exists in the artifact because the GitRepository
// includes another repository's shared/ at platform/. Real
// source-controller lays it out, the binding records the include with the
// included revision, and the audit lays it out the same way.
func TestFluxIncludeIsLaidOutAsSourceControllerDoes(t *testing.T) {
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	shared := newRepository(t, "shared/"+namespace+".git")
	sharedCommit := shared.commit(t, "Share the bge server", map[string]string{
		"shared/kustomization.yaml": "resources:\n- bge.yaml\n",
		"shared/bge.yaml":           serverManifest(harness.DefaultStorageClass, ""),
	})
	fleet := newRepository(t, "fleet/"+namespace+".git")
	commit := fleet.commit(t, "Serve the shared bge server", map[string]string{
		"servers/kustomization.yaml": "resources:\n- ../platform\n",
	})
	sharedSource := newGitRepository(namespace, "shared", shared.url)
	g.Expect(cluster.Client.Create(t.Context(), sharedSource)).To(Succeed())
	including := newGitRepository(namespace, gitRepositoryName, fleet.url)
	g.Expect(unstructured.SetNestedSlice(including.Object, []any{map[string]any{
		"repository": map[string]any{"name": "shared"}, "fromPath": "shared", "toPath": "platform",
	}}, "spec", "include")).To(Succeed())
	g.Expect(cluster.Client.Create(t.Context(), including)).To(Succeed())
	exprs, err := shippedHealthCheckExprs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Client.Create(t.Context(), newKustomization(namespace, gitRepositoryName, exprs))).To(Succeed())

	var bindingName string
	step(t, "the binding records the include and the revision included", func(t *testing.T) {
		server := expectAppliedAfterServerReady(t, namespace, commit, false)
		bindingName = expectFluxBinding(t, server, fleet.url, commit, harness.DefaultStorageClass)
		g := NewWithT(t)
		binding := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: bindingName}, binding)).To(Succeed())
		g.Expect(binding.Spec.Source.Render).NotTo(BeNil())
		var inputs embedopsv1.GitSourceInputs
		g.Expect(json.Unmarshal([]byte(binding.Spec.Source.Render.Source), &inputs)).To(Succeed())
		g.Expect(inputs.Include).To(Equal([]embedopsv1.GitInclude{{
			Name: "shared", Repository: shared.url, Revision: revisionOf(sharedCommit), FromPath: "shared", ToPath: "platform",
		}}))
	})
	step(t, "audit lays the include out and verifies the binding", func(t *testing.T) {
		results := runAudit(t, namespace, bindingName)
		g := NewWithT(t)
		g.Expect(results).To(HaveLen(1))
		g.Expect(results[0].Result).To(Equal(audit.Verified), "%s %v", results[0].Reason, results[0].Differences)
		g.Expect(results[0].RecordedCommit).To(Equal(commit))
		g.Expect(results[0].OriginSubject).To(Equal("Serve the shared bge server"))
	})
}
