package argocd

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/gittestserver"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/test/harness"
)

// TestArgoCDSyncsAndAuditsAPrivateRepository serves the repository only to
// a user and password kept in an Argo CD repository Secret in argocd: Argo
// CD syncs through it, and `embedops audit` verifies the binding through
// the same Secret.
func TestArgoCDSyncsAndAuditsAPrivateRepository(t *testing.T) {
	const username, password = "ada", "s3cret-platform"
	private := gittestserver.NewGitServer(t.TempDir()).Auth(username, password)
	g := NewWithT(t)
	g.Expect(private.StartHTTP()).To(Succeed())
	t.Cleanup(private.StopHTTP)

	namespace := cluster.Namespace(t)
	name := namespace
	repo, err := harness.CreateGitRepo(private, "platform/"+namespace+".git", branch)
	g.Expect(err).NotTo(HaveOccurred())
	repo.PushAs(username, password)
	subject := "Serve bge-small from a private repository"
	commitA := commit(t, repo, subject, map[string]string{serverFile(name): serverManifest(name, harness.DefaultStorageClass, "0s", "")})
	createRepositorySecret(t, name, repo.URL, username, password)
	createApplication(t, name, namespace, repo.URL, serversPath)

	server := expectHealthyAfterServerReady(t, name, client.ObjectKey{Namespace: namespace, Name: name}, syncedAt(commitA))
	binding := expectArgoCDBinding(t, server, name, repo.URL, commitA)
	expectAudited(t, namespace, binding.Name, commitA, subject)
}

// createRepositorySecret creates Argo CD's repository Secret for url in
// argocd (argo-cd docs, declarative setup: label
// argocd.argoproj.io/secret-type=repository; keys type, url, username,
// password) and deletes it when the test ends.
func createRepositorySecret(t *testing.T, name, url, username, password string) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: harness.ArgoCDNamespace,
			Labels: map[string]string{audit.ArgoSecretTypeLabel: "repository"},
		},
		StringData: map[string]string{"type": "git", "url": url, "username": username, "password": password},
	}
	NewWithT(t).Expect(cluster.Client.Create(t.Context(), secret)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), secret) })
}
