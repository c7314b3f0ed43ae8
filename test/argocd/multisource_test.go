package argocd

import (
	"slices"
	"testing"

	"github.com/embedops/embedops/test/harness"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestArgoCDMultiSourceRecordsTheRenderingSource syncs an Application of
// two sources, rendered by the real repo-server: first a bare `ref` source
// (a values repository, which renders nothing), then the servers'
// directory. The binding records the second source's repository and the
// commit Argo CD synced it at (status.sync.revisions[1]), not the first's,
// and the audit verifies it.
func TestArgoCDMultiSourceRecordsTheRenderingSource(t *testing.T) {
	namespace := cluster.Namespace(t)
	name := namespace
	values := newRepository(t, "values/"+namespace+".git")
	valuesCommit := commit(t, values, "Describe the values", map[string]string{"README.md": "# Values\n"})
	repo := newRepository(t, "platform/"+namespace+".git")
	subject := "Serve bge-small beside a values repository"
	commitA := commit(t, repo, subject, map[string]string{serverFile(name): serverManifest(name, harness.DefaultStorageClass, "0s", "")})
	createApplicationFrom(t, name, namespace,
		map[string]any{"repoURL": values.URL, "targetRevision": branch, "ref": "values"},
		gitSource(repo.URL, serversPath))

	server := expectHealthyAfterServerReady(t, name, client.ObjectKey{Namespace: namespace, Name: name}, func(s *appStatus) bool {
		return slices.Equal(s.Sync.Revisions, []string{valuesCommit, commitA})
	})
	binding := expectArgoCDBinding(t, server, name, repo.URL, commitA)
	expectAudited(t, namespace, binding.Name, commitA, subject)
}
