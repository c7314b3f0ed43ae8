package audit

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
)

// TestCloneToleratesARemoteHeadWithoutItsBranch clones a repository whose
// HEAD names master while only main exists, as a bare repository made with
// `git init` and pushed only main looks.
func TestCloneToleratesARemoteHeadWithoutItsBranch(t *testing.T) {
	requireUploadPack(t)
	g := NewWithT(t)
	dir, remote, commits := remoteWithCommits(t, "first")
	commit := commits[0]
	g.Expect(remote.Storer.SetReference(plumbing.NewHashReference("refs/heads/main", commit))).To(Succeed())
	g.Expect(remote.Storer.RemoveReference("refs/heads/master")).To(Succeed())

	opts := RepositoryOptions{URL: "file://" + dir, CacheDir: t.TempDir()}
	repo, err := OpenRepository(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	main, err := repo.Reference("refs/remotes/origin/main", true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(main.Hash()).To(Equal(commit))
	_, err = OpenRepository(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred(), "the cached clone is fetched again")
	g.Expect(filepath.Glob(filepath.Join(opts.CacheDir, "*.git"))).To(HaveLen(1))
}

// TestResolveRevisionReadsAClonesBranchesAndHead resolves revisions of a
// clone as of the remote: branches are origin's, HEAD is origin's HEAD.
func TestResolveRevisionReadsAClonesBranchesAndHead(t *testing.T) {
	requireUploadPack(t)
	g := NewWithT(t)
	dir, remote, commits := remoteWithCommits(t, "first", "second")
	first, second := commits[0], commits[1]
	g.Expect(remote.Storer.SetReference(plumbing.NewHashReference("refs/heads/main", second))).To(Succeed())
	g.Expect(remote.Storer.SetReference(plumbing.NewHashReference("refs/tags/v1", first))).To(Succeed())
	g.Expect(remote.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main"))).To(Succeed())
	g.Expect(remote.Storer.RemoveReference("refs/heads/master")).To(Succeed())

	opts := RepositoryOptions{URL: "file://" + dir, CacheDir: t.TempDir()}
	repo, err := OpenRepository(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	for revision, want := range map[string]plumbing.Hash{"main": second, "HEAD": second, "v1": first, first.String(): first} {
		commit, err := ResolveRevision(context.Background(), repo, opts, revision)
		g.Expect(err).NotTo(HaveOccurred(), revision)
		g.Expect(commit).To(Equal(want.String()), revision)
	}
	_, err = ResolveRevision(context.Background(), repo, opts, "v2")
	g.Expect(err).To(MatchError(plumbing.ErrReferenceNotFound))
}

// remoteWithCommits makes a repository in a temporary directory with one
// empty commit per message on its initial branch, and returns its
// directory, the repository and the commits in order.
func remoteWithCommits(t *testing.T, messages ...string) (string, *git.Repository, []plumbing.Hash) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	remote, err := git.PlainInit(dir, false)
	g.Expect(err).NotTo(HaveOccurred())
	tree, err := remote.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	signature := &object.Signature{Name: "a", Email: "a@example.com", When: time.Unix(0, 0)}
	commits := make([]plumbing.Hash, 0, len(messages))
	for _, message := range messages {
		commit, err := tree.Commit(message, &git.CommitOptions{AllowEmptyCommits: true, Author: signature})
		g.Expect(err).NotTo(HaveOccurred())
		commits = append(commits, commit)
	}
	return dir, remote, commits
}
