package audit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// RepositoryOptions say where the repository behind a binding is.
type RepositoryOptions struct {
	// Path is a local repository (a work tree or a bare repository). When
	// set, it is used for every binding's own repository; only the
	// repositories a GitRepository includes are cloned.
	Path string
	// URL is the repository to clone when Path is empty; All takes it
	// from each binding's spec.source.repository.
	URL string
	// CacheDir holds bare clones, one per URL, reused and fetched on later
	// runs. Required when cloning.
	CacheDir string
	// Credentials authenticate OpenRepository's clone and fetches of URL
	// (see Credentials for what each transport uses). All does not use
	// them: it takes each repository's from Given and Lookup.
	Credentials Credentials
	// Given are the credentials of flags and the environment, with the
	// repositories they are for (All only). For a binding's repository
	// they override, kind by kind, those Lookup finds: the precedence is
	// flags and environment, then the cluster's, then none (anonymous
	// HTTP; the SSH agent with the user's known_hosts files). Included
	// repositories and submodules get Given's alone.
	Given *GivenCredentials
	// Lookup, when set, finds a binding's credentials as the tool that
	// applied it has them, for the binding's own repository only (All
	// only). An error names what could not be read; the clone goes on
	// without it, and the binding is Unverifiable with that error when the
	// clone fails.
	Lookup func(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (Credentials, error)
	// FromCluster says the bindings were read from the cluster (All only):
	// a repository they name that is a local path or a file:// URL is
	// refused. Bindings from the user's own file may name one.
	FromCluster bool
}

// DefaultCacheDir is where clones are kept unless told otherwise: the
// user's cache directory, under embedops/repositories.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w", err)
	}
	return filepath.Join(dir, "embedops", "repositories"), nil
}

// OpenRepository opens opts.Path (a work tree, a directory inside one, or a
// bare repository), or else a bare clone of opts.URL in
// opts.CacheDir: cloned on first use, fetched (all branches and tags) when
// it is already there. The repository is returned ready for reading
// history (see forReading): it has no work tree and keeps its pack files
// open, so it suits a command that audits and exits.
func OpenRepository(ctx context.Context, opts RepositoryOptions) (*git.Repository, error) {
	if opts.Path != "" {
		repo, err := git.PlainOpen(opts.Path)
		if errors.Is(err, git.ErrRepositoryNotExists) {
			// A directory inside a work tree, as git itself accepts.
			repo, err = git.PlainOpenWithOptions(opts.Path, &git.PlainOpenOptions{DetectDotGit: true})
		}
		if err != nil {
			return nil, fmt.Errorf("opening repository %s: %w", opts.Path, err)
		}
		return forReading(repo)
	}
	if opts.URL == "" {
		return nil, errors.New("no repository: give a local path or a URL")
	}
	if opts.CacheDir == "" {
		return nil, fmt.Errorf("cloning %s: no cache directory", DisplayURL(opts.URL))
	}
	r, err := opts.Credentials.remoteFor(opts.URL)
	if err != nil {
		return nil, err
	}
	dir := cloneDir(opts.CacheDir, opts.URL)
	var repo *git.Repository
	if _, err = os.Stat(dir); err == nil {
		repo, err = fetch(ctx, dir, r)
	} else {
		repo, err = clone(ctx, dir, r)
	}
	if err != nil {
		return nil, err
	}
	return forReading(repo)
}

// forReading reopens a repository for a long read: its pack files stay open
// and its object listings are cached, which makes walking a long history
// several times faster. The repository is read through its objects only
// (it has no work tree) and must not change while it is read; its files
// stay open until the process exits or its storage is closed.
func forReading(repo *git.Repository) (*git.Repository, error) {
	files, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	storage := filesystem.NewStorageWithOptions(files.Filesystem(), cache.NewObjectLRUDefault(),
		filesystem.Options{KeepDescriptors: true, ExclusiveAccess: true})
	reopened, err := git.Open(storage, nil)
	if err != nil {
		return nil, fmt.Errorf("reopening repository: %w", err)
	}
	return reopened, nil
}

// DisplayURL is a repository URL fit to print: a password in it is
// replaced by "xxxxx" (net/url's Redacted). Anything that does not parse as
// a URL with a scheme (a path, scp-like SSH) carries none and is returned
// as is.
func DisplayURL(raw string) string {
	parsed, err := neturl.Parse(raw)
	if err != nil || parsed.Scheme == "" || parsed.User == nil {
		return raw
	}
	return parsed.Redacted()
}

// cloneDir is the cache entry of a URL: a hash, so any URL makes a safe name.
func cloneDir(cacheDir, url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(cacheDir, hex.EncodeToString(sum[:])[:20]+".git")
}

// clone makes a bare clone of url in dir, removing what it left on failure.
// It initialises the repository and fetches every branch and tag rather than
// cloning: go-git's clone gives up when the remote's HEAD names a branch
// that does not exist (a bare repository made by `git init` points HEAD at
// master even when only main was ever pushed), which git itself accepts.
func clone(ctx context.Context, dir string, r remote) (*git.Repository, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return nil, fmt.Errorf("creating cache directory: %w", err)
	}
	repo, err := initRemote(dir, r.url)
	if err == nil {
		err = repo.FetchContext(r.withRedirectCheck(ctx), r.fetchOptions())
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("cloning %s: %w", DisplayURL(r.url), r.explain(err))
	}
	return repo, nil
}

// initRemote creates a bare repository in dir whose origin is url.
func initRemote(dir, url string) (*git.Repository, error) {
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return nil, err
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}}); err != nil {
		return nil, err
	}
	return repo, nil
}

// fetch updates the clone in dir.
func fetch(ctx context.Context, dir string, r remote) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("opening cached clone of %s in %s: %w", DisplayURL(r.url), dir, err)
	}
	options := r.fetchOptions()
	options.RemoteURL = r.url
	err = repo.FetchContext(r.withRedirectCheck(ctx), options)
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, fmt.Errorf("fetching %s: %w", DisplayURL(r.url), r.explain(err))
	}
	return repo, nil
}

// ResolveRevision is the commit a revision (a commit, branch or tag) names
// in a repository OpenRepository returned for opts. In a local repository
// it resolves as git does. In a clone, whose branches are the remote's
// (refs/remotes/origin/...), a branch name is the remote's branch and HEAD
// the remote's HEAD, asked of the remote.
func ResolveRevision(ctx context.Context, repo *git.Repository, opts RepositoryOptions, revision string) (string, error) {
	candidates := []string{revision}
	if opts.Path == "" {
		candidates = append(candidates, git.DefaultRemoteName+"/"+revision)
		if revision == plumbing.HEAD.String() {
			head, err := remoteHead(ctx, repo, opts)
			if err != nil {
				return "", err
			}
			candidates = append(candidates, head)
		}
	}
	var first error
	for _, candidate := range candidates {
		hash, err := repo.ResolveRevision(plumbing.Revision(candidate))
		if err == nil {
			return hash.String(), nil
		}
		first = cmp.Or(first, err)
	}
	return "", first
}

// remoteHead is what the remote's HEAD names, as a revision of its clone:
// origin/<branch>, or a commit.
func remoteHead(ctx context.Context, repo *git.Repository, opts RepositoryOptions) (string, error) {
	r, err := opts.Credentials.remoteFor(opts.URL)
	if err != nil {
		return "", err
	}
	origin := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{opts.URL}})
	refs, err := origin.ListContext(r.withRedirectCheck(ctx), r.listOptions())
	if err != nil {
		return "", fmt.Errorf("listing the references of %s: %w", DisplayURL(opts.URL), r.explain(err))
	}
	for _, ref := range refs {
		switch {
		case ref.Name() != plumbing.HEAD:
		case ref.Type() == plumbing.SymbolicReference:
			return git.DefaultRemoteName + "/" + ref.Target().Short(), nil
		default:
			return ref.Hash().String(), nil
		}
	}
	return "", fmt.Errorf("%s has no HEAD: name a branch, tag or commit", DisplayURL(opts.URL))
}
