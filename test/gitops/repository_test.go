package gitops

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// author signs every commit the test pushes.
var author = object.Signature{Name: "Ada Platform", Email: "ada@example.com"}

// repository is a repository on the git server, written through an
// in-memory clone that pushes branch after every commit.
type repository struct {
	// url is where Flux and `embedops audit` clone it from.
	url  string
	repo *git.Repository
}

// newRepository creates an empty repository at path on the git server,
// with branch as its default branch as a git host would have it, and a
// local clone of it.
func newRepository(t *testing.T, path string) *repository {
	t.Helper()
	head := plumbing.NewBranchReferenceName(branch)
	if _, err := git.PlainInitWithOptions(filepath.Join(gitServer.Root(), path), &git.PlainInitOptions{
		Bare: true, InitOptions: git.InitOptions{DefaultBranch: head},
	}); err != nil {
		t.Fatalf("creating the repository on the git server: %v", err)
	}
	repo, err := git.InitWithOptions(memory.NewStorage(), memfs.New(), git.InitOptions{DefaultBranch: head})
	if err != nil {
		t.Fatalf("initialising a repository: %v", err)
	}
	url := gitServer.HTTPAddress() + "/" + path
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}}); err != nil {
		t.Fatalf("adding the remote: %v", err)
	}
	return &repository{url: url, repo: repo}
}

// commit writes files (path to content), commits them with subject, pushes
// and returns the commit's sha.
func (r *repository) commit(t *testing.T, subject string, files map[string]string) string {
	t.Helper()
	hash, err := r.commitFiles(subject, files)
	if err != nil {
		t.Fatalf("committing %q: %v", subject, err)
	}
	refSpec := config.RefSpec(fmt.Sprintf("refs/heads/%[1]s:refs/heads/%[1]s", branch))
	if err := r.repo.PushContext(t.Context(), &git.PushOptions{RefSpecs: []config.RefSpec{refSpec}}); err != nil {
		t.Fatalf("pushing %q to %s: %v", subject, r.url, err)
	}
	t.Logf("pushed %s %s", hash, subject)
	return hash
}

// commitFiles writes and stages files and commits them.
func (r *repository) commitFiles(subject string, files map[string]string) (string, error) {
	tree, err := r.repo.Worktree()
	if err != nil {
		return "", err
	}
	for path, content := range files {
		if err := util.WriteFile(tree.Filesystem, path, []byte(content), 0o644); err != nil {
			return "", err
		}
		if _, err := tree.Add(path); err != nil {
			return "", err
		}
	}
	signature := author
	signature.When = time.Now()
	hash, err := tree.Commit(subject, &git.CommitOptions{Author: &signature})
	if err != nil {
		return "", err
	}
	return hash.String(), nil
}
