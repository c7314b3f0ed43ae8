package v1alpha1_test

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/embedops/embedops/test/harness"
)

func TestEmbeddingServerExistingClaimRefusesWhatContradictsIt(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	const spec = "model:\n  name: a/b\ncache:\n  existingClaim: models\n"
	cases := []struct {
		name, spec, message string
	}{
		{"with mode None", spec + "  mode: None\n", "cache.existingClaim mounts a claim, cache.mode None keeps no cache: remove one of them"},
		{"with mode Shared", spec + "  mode: Shared\n", "cache.existingClaim is mounted by every replica as it is: remove cache.mode Shared"},
		{"with a storage class", spec + "  storageClassName: fast\n", "cache.existingClaim uses the claim as it is: remove cache.storageClassName"},
		{"with a size", spec + "  size: 20Gi\n", "cache.existingClaim uses the claim as it is: remove cache.size"},
		{"not a claim name", "model:\n  name: a/b\ncache:\n  existingClaim: My_Claim\n", "spec.cache.existingClaim in body should match"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(t.Context(), serverManifest(t, namespace, "s", tc.spec))
			g.Expect(err).To(HaveOccurred(), "the API server accepted a contradicting existingClaim")
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestEmbeddingServerExistingClaimKeepsTheDefaults(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	obj := serverManifest(t, namespace, "byov", "model:\n  name: a/b\ncache:\n  existingClaim: models\n  retainFor: 1h\n")
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed(), "the schema's own defaults (mode, size) do not contradict existingClaim")
	claim, _, _ := unstructured.NestedString(obj.Object, "spec", "cache", "existingClaim")
	g.Expect(claim).To(Equal("models"))
}

func TestExistingClaimExampleIsAccepted(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob(filepath.Join(root, "examples", "existing-claim", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(2))
	for _, path := range files {
		obj := readExample(t, path)
		obj.SetNamespace(namespace)
		g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed(), filepath.Base(path))
	}
}
