package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// GitAuthor signs every commit the tests and make dev push.
var GitAuthor = object.Signature{Name: "Ada Platform", Email: "ada@example.com"}

// StartGitServer serves the bare repositories under dir over HTTP on
// loopback, as a git host would.
func StartGitServer(dir string) (*gittestserver.GitServer, error) {
	server := gittestserver.NewGitServer(dir)
	if err := server.StartHTTP(); err != nil {
		return nil, fmt.Errorf("starting the git server: %w", err)
	}
	return server, nil
}

// GitRepo is a repository on the git server, written through an in-memory
// clone that pushes its branch after every commit.
type GitRepo struct {
	// URL is where Flux and `embedops audit` clone it from.
	URL string
	// Branch is the branch commits go to.
	Branch string

	repo *git.Repository
	auth transport.AuthMethod
}

// CreateGitRepo creates an empty repository at path on the git server, with
// branch as its default branch as a git host would have it, and a local
// clone of it.
func CreateGitRepo(server *gittestserver.GitServer, path, branch string) (*GitRepo, error) {
	head := plumbing.NewBranchReferenceName(branch)
	if _, err := git.PlainInitWithOptions(filepath.Join(server.Root(), path), &git.PlainInitOptions{
		Bare: true, InitOptions: git.InitOptions{DefaultBranch: head},
	}); err != nil {
		return nil, fmt.Errorf("creating the repository on the git server: %w", err)
	}
	repo, err := git.InitWithOptions(memory.NewStorage(), memfs.New(), git.InitOptions{DefaultBranch: head})
	if err != nil {
		return nil, fmt.Errorf("initialising a repository: %w", err)
	}
	url := server.HTTPAddress() + "/" + path
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}}); err != nil {
		return nil, fmt.Errorf("adding the remote: %w", err)
	}
	return &GitRepo{URL: url, Branch: branch, repo: repo}, nil
}

// CloneGitRepo clones branch of the repository at url into memory.
func CloneGitRepo(ctx context.Context, url, branch string) (*GitRepo, error) {
	repo, err := git.CloneContext(ctx, memory.NewStorage(), memfs.New(), &git.CloneOptions{
		URL: url, ReferenceName: plumbing.NewBranchReferenceName(branch), SingleBranch: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cloning %s: %w", url, err)
	}
	return &GitRepo{URL: url, Branch: branch, repo: repo}, nil
}

// PushAs has later pushes authenticate with HTTP basic auth, as to a
// private repository on a server started with Auth.
func (r *GitRepo) PushAs(username, password string) {
	r.auth = &githttp.BasicAuth{Username: username, Password: password}
}

// ReadFile reads a file of the clone's work tree.
func (r *GitRepo) ReadFile(path string) ([]byte, error) {
	fs, err := r.files()
	if err != nil {
		return nil, err
	}
	data, err := util.ReadFile(fs, path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, nil
}

// Commit writes files (path to content), commits them with subject as
// GitAuthor, pushes the branch and returns the commit's sha.
func (r *GitRepo) Commit(ctx context.Context, subject string, files map[string]string) (string, error) {
	hash, err := r.commitFiles(subject, files)
	if err != nil {
		return "", fmt.Errorf("committing %q: %w", subject, err)
	}
	refSpec := config.RefSpec(fmt.Sprintf("refs/heads/%[1]s:refs/heads/%[1]s", r.Branch))
	if err := r.repo.PushContext(ctx, &git.PushOptions{RefSpecs: []config.RefSpec{refSpec}, Auth: r.auth}); err != nil {
		return "", fmt.Errorf("pushing %q to %s: %w", subject, r.URL, err)
	}
	return hash, nil
}

// commitFiles writes and stages files and commits them.
func (r *GitRepo) commitFiles(subject string, files map[string]string) (string, error) {
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
	signature := GitAuthor
	signature.When = time.Now()
	hash, err := tree.Commit(subject, &git.CommitOptions{Author: &signature})
	if err != nil {
		return "", err
	}
	return hash.String(), nil
}

// files is the clone's work tree.
func (r *GitRepo) files() (billy.Filesystem, error) {
	tree, err := r.repo.Worktree()
	if err != nil {
		return nil, fmt.Errorf("opening the work tree: %w", err)
	}
	return tree.Filesystem, nil
}
