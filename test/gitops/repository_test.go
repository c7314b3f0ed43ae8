package gitops

import (
	"testing"

	"github.com/embedops/embedops/test/harness"
)

// author signs every commit the test pushes.
var author = harness.GitAuthor

// repository is a repository on the git server (test/harness writes it).
type repository struct {
	// url is where Flux and `embedops audit` clone it from.
	url  string
	repo *harness.GitRepo
}

// newRepository creates an empty repository at path on the git server,
// with branch as its default branch, and a local clone of it.
func newRepository(t *testing.T, path string) *repository {
	t.Helper()
	repo, err := harness.CreateGitRepo(gitServer, path, branch)
	if err != nil {
		t.Fatal(err)
	}
	return &repository{url: repo.URL, repo: repo}
}

// commit writes files (path to content), commits them with subject, pushes
// and returns the commit's sha.
func (r *repository) commit(t *testing.T, subject string, files map[string]string) string {
	t.Helper()
	hash, err := r.repo.Commit(t.Context(), subject, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s %s", hash, subject)
	return hash
}
