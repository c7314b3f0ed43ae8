package audit

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Options tune an audit.
type Options struct {
	// Progress, when set, is called while the origin search walks history:
	// done of total first-parent commits below the recorded one examined.
	// The search usually stops early; it ends with done == total. All
	// starts again from zero for each binding.
	Progress func(done, total int)
	// DeclaredHosts, when set, are the only hosts All fetches a Declared
	// binding's repository from; any other makes it Unverifiable. Not used
	// with a local RepositoryOptions.Path, which fetches nothing.
	DeclaredHosts *DeclaredHosts
	// fetching is set by All when it clones each binding's repository.
	fetching bool
}

// sha1Commit is a full SHA-1 commit id; go-git reads SHA-1 repositories.
var sha1Commit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Audit verifies one binding against the repository its source names and
// finds the commit its decision originates from.
func Audit(ctx context.Context, repo *git.Repository, binding *embedopsv1.ModelCacheBinding, opts Options) Result {
	open := func() (*git.Repository, error) {
		if repo == nil {
			return nil, errors.New("no repository")
		}
		return repo, nil
	}
	included := func(url string) (*git.Repository, error) {
		return nil, fmt.Errorf("only the binding's own repository was given, not %s", DisplayURL(url))
	}
	return newAuditor(opts).audit(ctx, binding, open, included)
}

// All audits bindings in order, each in repos.Path when set, else in a
// clone of its own spec.source.repository (repos.URL and repos.Credentials
// are ignored), authenticated with what repos.Given has for its URL over
// what repos.Lookup finds for the binding. Repositories a GitRepository
// includes, and submodules, are cloned into repos.CacheDir, authenticated
// with what repos.Given has for their URLs alone. A URL refusedRepository
// refuses is not opened. Builds are shared between bindings of the same
// repository. A repository that cannot be opened, tried once per set of
// credentials, makes its bindings Unverifiable.
func All(ctx context.Context, repos RepositoryOptions, bindings []embedopsv1.ModelCacheBinding, opts Options) []Result {
	if repos.Path == "" {
		opts.fetching = true
	}
	a := newAuditor(opts)
	type openedRepository struct {
		repo *git.Repository
		err  error
	}
	opened := map[string]openedRepository{}
	results := make([]Result, 0, len(bindings))
	for i := range bindings {
		binding := &bindings[i]
		open := func() (*git.Repository, error) {
			o := repos
			o.URL = binding.Spec.Source.Repository
			key := "" // with a local Path, every binding shares one key
			var lookupErr, err error
			if o.Path == "" {
				if o.Credentials, lookupErr, err = credentialsFor(ctx, repos, binding); err != nil {
					return nil, err
				}
				key = o.URL + "\x00" + o.Credentials.key()
			}
			r, ok := opened[key]
			if !ok {
				r.repo, r.err = OpenRepository(ctx, o)
				if r.err != nil && lookupErr != nil {
					r.err = fmt.Errorf("%w; %w", lookupErr, r.err)
				}
				opened[key] = r
			}
			return r.repo, r.err
		}
		included := func(url string) (*git.Repository, error) {
			creds, err := includedCredentials(repos, url)
			if err != nil {
				return nil, err
			}
			key := url + "\x00" + creds.key()
			r, ok := opened[key]
			if !ok {
				r.repo, r.err = OpenRepository(ctx, RepositoryOptions{URL: url, CacheDir: repos.CacheDir, Credentials: creds})
				opened[key] = r
			}
			return r.repo, r.err
		}
		results = append(results, a.audit(ctx, binding, open, included))
	}
	return results
}

// credentialsFor is what repos.Given has for the binding's repository
// over what repos.Lookup finds for it, the tool's credentials for the
// repository its source object names; lookupErr is the lookup's error,
// returned with what it did find. err refuses the repository.
func credentialsFor(ctx context.Context, repos RepositoryOptions, binding *embedopsv1.ModelCacheBinding) (creds Credentials, lookupErr, err error) {
	given, err := includedCredentials(repos, binding.Spec.Source.Repository)
	if err != nil || repos.Lookup == nil {
		return given, nil, err
	}
	found, lookupErr := repos.Lookup(ctx, binding)
	return found.OverriddenBy(given), lookupErr, nil
}

// includedCredentials is what repos.Given has for a repository URL, after
// refusedRepository lets it through.
func includedCredentials(repos RepositoryOptions, url string) (Credentials, error) {
	if err := refusedRepository(url, repos.FromCluster); err != nil {
		return Credentials{}, err
	}
	return repos.Given.ForURL(url)
}

// auditor audits bindings, keeping one renderer per repository.
type auditor struct {
	opts      Options
	renderers map[*git.Repository]*renderer
}

func newAuditor(opts Options) *auditor {
	return &auditor{opts: opts, renderers: map[*git.Repository]*renderer{}}
}

// audit checks the binding against itself, then against the manifest at the
// recorded commit, then walks history for the origin. open opens the
// binding's repository; included opens a repository its GitRepository
// includes, by URL.
func (a *auditor) audit(ctx context.Context, binding *embedopsv1.ModelCacheBinding, open func() (*git.Repository, error),
	included func(url string) (*git.Repository, error)) Result {
	source := binding.Spec.Source
	res := Result{
		Binding:        binding.Namespace + "/" + binding.Name,
		Repository:     printableRepository(source.Repository),
		Path:           source.Path,
		RecordedCommit: source.Commit,
		Artifact:       source.Artifact,
		Claims:         claimsOf(binding),
	}
	res.Attestation, res.AttestedBy = attestationOf(source)
	selfChecked := integrity(binding.Spec)
	if reason := unverifiableSource(source); reason != "" {
		return concluded(res, selfChecked, reason)
	}
	if reason := a.opts.DeclaredHosts.refusal(source); reason != "" && a.opts.fetching {
		return concluded(res, selfChecked, reason)
	}
	repo, err := open()
	if err != nil {
		return concluded(res, selfChecked, fromArtifact(source, fmt.Sprintf("opening the repository: %v", err)))
	}
	rc, reason := recipeFor(repo, source)
	if reason != "" {
		return concluded(res, selfChecked, reason)
	}
	lay, reason := layoutFor(repo, source, included)
	if reason != "" {
		return concluded(res, selfChecked, reason)
	}
	w := a.walk(repo, binding, rc, lay)
	recorded, err := repo.CommitObject(plumbing.NewHash(source.Commit))
	if err != nil {
		return concluded(res, selfChecked, fromArtifact(source, fmt.Sprintf("commit %s is not in the repository: %v", source.Commit, err)))
	}
	at := w.evaluate(recorded)
	res.CommitsWalked, res.Renders = 1, w.renders()
	if at.err != nil {
		return concluded(res, selfChecked, fromArtifact(source, w.reason(at, recorded)))
	}
	res.Server = at.server
	res.Differences = merged(differences(binding.Spec, at.decision), selfChecked)
	if len(res.Differences) > 0 {
		res.Result = Mismatch
		return res
	}
	found, err := w.origin(ctx, recorded, at.decision, a.opts.Progress)
	res.CommitsWalked, res.Renders = found.walked, w.renders()
	if err != nil {
		return concluded(res, nil, fmt.Sprintf("searching for the origin commit: %v", err))
	}
	res.Result = Verified
	if found.shallow {
		res.Reason = "the history is shallow: the decision may be older than the origin commit"
	}
	origin := found.origin
	res.OriginCommit = origin.Hash.String()
	res.OriginAuthor = fmt.Sprintf("%s <%s>", origin.Author.Name, origin.Author.Email)
	res.OriginDate = origin.Author.When.Format(time.RFC3339)
	res.OriginSubject, _, _ = strings.Cut(strings.TrimSpace(origin.Message), "\n")
	res.StorageOriginCommit = found.storageOrigin.Hash.String()
	return res
}

// concluded ends an audit that could not compare with the manifest: a
// Mismatch when the binding contradicts itself, else Unverifiable.
func concluded(res Result, selfChecked []Difference, reason string) Result {
	res.Reason = reason
	res.Result = Unverifiable
	if len(selfChecked) > 0 {
		res.Result = Mismatch
		res.Differences = selfChecked
	}
	return res
}

// unverifiableSource says why a binding's source names no commit to render.
func unverifiableSource(source embedopsv1.DecisionSource) string {
	switch {
	case source.Chart != "":
		return fmt.Sprintf("not a git source: chart %s %s from %s", source.Chart, source.Revision, source.Repository)
	case isOCI(source.Repository):
		return fmt.Sprintf("not a git source: OCI artifact %s %s", source.Repository, source.Revision)
	case source.Method == embedopsv1.SourceUnknown || source.Method == "":
		return "the binding's source is Unknown: no git revision was recorded"
	case source.Artifact != "" && source.Commit == "":
		return fmt.Sprintf("artifact %s (revision %q) cannot be traced to git: it carries no %s and %s annotations naming the commit it was built from",
			source.Artifact, source.Revision, "org.opencontainers.image.revision", "org.opencontainers.image.source")
	case source.Commit == "":
		return fmt.Sprintf("the binding records no commit (revision %q)", source.Revision)
	case !sha1Commit.MatchString(source.Commit):
		return fmt.Sprintf("commit %s is not a SHA-1 commit id", source.Commit)
	case !cleanPath(source.Path):
		return fmt.Sprintf("path %q leaves the repository", source.Path)
	}
	return ""
}

// isOCI reports whether a repository URL names an OCI registry, as Argo
// CD's oci:// sources do.
func isOCI(repository string) bool {
	return strings.HasPrefix(strings.ToLower(repository), "oci://")
}

// fromArtifact says that a source applied from an OCI artifact could not
// be verified from the git commit it was built from, and how that commit
// is rendered: the Kustomization's path from the origin repository's root,
// which is where `flux push artifact --path=.` packs from.
func fromArtifact(source embedopsv1.DecisionSource, reason string) string {
	if source.Artifact == "" {
		return reason
	}
	return fmt.Sprintf("artifact %s cannot be verified from its origin %s at %s (rendered from the repository's root): %s",
		source.Artifact, DisplayURL(source.Repository), source.Commit, reason)
}

// cleanPath reports whether a recorded path stays inside the repository.
func cleanPath(p string) bool {
	clean := path.Clean("./" + p)
	return clean != ".." && !strings.HasPrefix(clean, "../")
}

// renderDir is the directory to build for a recorded path: Flux's "./apps"
// and "apps/" both mean "apps"; empty means the root.
func renderDir(p string) string {
	return path.Clean("./" + p)
}
