package gitops

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// Names of the objects in git and of the Flux objects that apply them.
const (
	serverName        = "bge"
	serverFile        = "servers/bge.yaml"
	gitRepositoryName = "platform"
	kustomizationName = "servers"
	// missingSecret is a token Secret that never exists.
	missingSecret = "bge-hf-token"
)

// TestFluxAppliesAServerAndItsDecisionsAudit follows one EmbeddingServer
// through three commits applied by Flux, then audits the cache decisions
// it left against the git server.
func TestFluxAppliesAServerAndItsDecisionsAudit(t *testing.T) {
	namespace := cluster.Namespace(t)
	fast := newStorageClass(t, namespace+"-fast")
	repo := newRepository(t, "platform/"+namespace+".git")
	repo.commit(t, "Describe the platform repository", map[string]string{"README.md": "# Platform\n"})
	commitA := repo.commit(t, "Serve bge-small", map[string]string{serverFile: serverManifest(harness.DefaultStorageClass, "")})
	createFluxObjects(t, namespace, repo.url)

	var commitB, bindingA, bindingB string
	step(t, "A adds the server: Ready after the server, the binding records A", func(t *testing.T) {
		server := expectAppliedAfterServerReady(t, namespace, commitA, true)
		bindingA = expectFluxBinding(t, server, repo.url, commitA, harness.DefaultStorageClass)
		expectHealthChecksOnlyForApplied(t, server)
	})
	step(t, "B changes the storage class: a new binding records B, the old one retires", func(t *testing.T) {
		commitB = repo.commit(t, "Move the bge cache to the fast class", map[string]string{serverFile: serverManifest(fast, "")})
		server := expectAppliedAfterServerReady(t, namespace, commitB, false)
		bindingB = expectFluxBinding(t, server, repo.url, commitB, fast)
		NewWithT(t).Expect(bindingB).NotTo(Equal(bindingA))
		expectReleased(t, namespace, bindingA)
	})
	// C exercises the health-check path, not admission: the spec is valid,
	// so kustomize-controller applies it; embedops stalls the server on the
	// missing Secret (Stalled=True, Ready=False, observedGeneration set), the
	// shipped `failed` expression matches, and kustomize-controller fails
	// fast, long before the Kustomization's timeout.
	step(t, "C stalls the server: the Kustomization fails fast", func(t *testing.T) {
		pushed := time.Now()
		commitC := repo.commit(t, "Read the bge token from a Secret", map[string]string{serverFile: serverManifest(fast, missingSecret)})
		expectHealthCheckFailed(t, namespace, commitC, pushed)
	})
	step(t, "audit verifies both bindings against the git server", func(t *testing.T) {
		expectAudited(t, namespace, []origin{
			{binding: bindingA, commit: commitA, subject: "Serve bge-small"},
			{binding: bindingB, commit: commitB, subject: "Move the bge cache to the fast class"},
		})
	})
}

// step runs f as a subtest and stops the test when it fails: each step
// builds on the cluster state the previous one left.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// serverManifest is the server as committed: a PerReplica cache in
// storageClass, released as soon as it is unused; tokenSecret, when set,
// names the Secret holding its HuggingFace token.
func serverManifest(storageClass, tokenSecret string) string {
	token := ""
	if tokenSecret != "" {
		token = fmt.Sprintf("    tokenSecretRef:\n      name: %s\n      key: token\n", tokenSecret)
	}
	return fmt.Sprintf(`apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: %s
spec:
  model:
    name: BAAI/bge-small-en-v1.5
%s  cache:
    storageClassName: %s
    size: 1Gi
    retainFor: 0s
`, serverName, token, storageClass)
}

// newStorageClass creates a StorageClass served by the test provisioner,
// like harness.DefaultStorageClass, and deletes it when the test ends.
func newStorageClass(t *testing.T, name string) string {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       harness.ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	NewWithT(t).Expect(cluster.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() {
		// The test's context is already cancelled during cleanup.
		_ = cluster.Client.Delete(context.Background(), class)
	})
	return name
}

// createFluxObjects creates the GitRepository and the Kustomization that
// apply the repository's servers into namespace, waiting with the shipped
// healthCheckExprs.
func createFluxObjects(t *testing.T, namespace, url string) {
	t.Helper()
	g := NewWithT(t)
	exprs, err := shippedHealthCheckExprs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Client.Create(t.Context(), newGitRepository(namespace, gitRepositoryName, url))).To(Succeed())
	g.Expect(cluster.Client.Create(t.Context(), newKustomization(namespace, gitRepositoryName, exprs))).To(Succeed())
}

// kustomizationKey names the Kustomization in namespace.
func kustomizationKey(namespace string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: kustomizationName}
}

// serverKey names the server in namespace.
func serverKey(namespace string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: serverName}
}
