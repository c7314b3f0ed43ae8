package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/provenance"
)

// errSubmodules is why a preview does not render a commit with submodules
// when the GitRepository recurses into them.
var errSubmodules = errors.New("the GitRepository recurses submodules and the commit has a .gitmodules file: a preview does not render submodules")

// submoduleDepth is how deep source-controller checks submodules out: go-git's
// DefaultSubmoduleRecursionDepth (fluxcd/pkg/git v0.52.0 gogit/clone.go,
// recurseSubmodules).
const submoduleDepth = 10

// layout is what source-controller adds to a GitRepository's artifact
// beyond the commit's tree: each included GitRepository's artifact, or the
// fromPath directory of it, placed at toPath (source-controller v1.9.6
// internal/controller/gitrepository_controller.go reconcileInclude, and
// fluxcd/pkg/artifact v0.18.0 storage/filesystem.go CopyToPath: untar,
// then rename fromPath onto toPath, which must not hold files already).
// With recurseSubmodules, each submodule is checked out at the commit its
// gitlink names, as go-git's clone does for source-controller. It lays a
// commit's tree out as that artifact, as a tree written to memory over the
// repositories' objects. The included revisions recorded at decision time
// are laid into every commit the origin search walks: which revision an
// earlier artifact included is not recorded anywhere.
type layout struct {
	storer     *overlay
	grafts     []graft
	submodules bool
	// origin is the repository's URL, which relative submodule URLs are
	// resolved against.
	origin string
	// open opens an included repository or a submodule's.
	open func(url string) (*git.Repository, error)
}

// graft is one included tree (or file) and where it goes.
type graft struct {
	path  string
	entry object.TreeEntry
}

// gitInputs reads the GitRepository settings recorded in a source.
func gitInputs(source embedopsv1.DecisionSource) (embedopsv1.GitSourceInputs, error) {
	var inputs embedopsv1.GitSourceInputs
	if source.Render == nil || source.Render.Source == "" {
		return inputs, nil
	}
	if err := json.Unmarshal([]byte(source.Render.Source), &inputs); err != nil {
		return inputs, fmt.Errorf("the recorded GitRepository settings cannot be read: %w", err)
	}
	return inputs, nil
}

// layoutFor prepares the layout of a source's artifact, opening each
// included repository with open; nil when the artifact is the commit's
// tree alone. reason says why it cannot be laid out.
func layoutFor(repo *git.Repository, source embedopsv1.DecisionSource, open func(url string) (*git.Repository, error)) (*layout, string) {
	inputs, err := gitInputs(source)
	if err != nil {
		return nil, err.Error()
	}
	if len(inputs.Include) == 0 && !inputs.RecurseSubmodules {
		return nil, ""
	}
	l := &layout{storer: newOverlay(repo.Storer), submodules: inputs.RecurseSubmodules, origin: source.Repository, open: open}
	for _, include := range inputs.Include {
		g, reason := includedTree(include, open)
		if reason != "" {
			return nil, fmt.Sprintf("GitRepository include %q: %s", include.Name, reason)
		}
		l.grafts = append(l.grafts, g.graft)
		l.storer.add(g.repo.Storer)
	}
	return l, ""
}

// includedGraft is an include's tree and the repository holding it.
type includedGraft struct {
	graft
	repo *git.Repository
}

// includedTree finds what an include copies: fromPath of the included
// repository at the recorded revision.
func includedTree(include embedopsv1.GitInclude, open func(string) (*git.Repository, error)) (includedGraft, string) {
	switch {
	case include.Repository == "":
		return includedGraft{}, "the included GitRepository did not exist at decision time"
	case include.Revision == "":
		return includedGraft{}, "no included revision was recorded (the GitRepository's status.includedArtifacts)"
	case include.ToPath == "" || !cleanPath(include.ToPath) || !cleanPath(include.FromPath):
		return includedGraft{}, fmt.Sprintf("cannot copy %q to %q", include.FromPath, include.ToPath)
	}
	rev, err := provenance.ParseRevision(include.Revision)
	if err != nil || rev.Commit() == "" {
		return includedGraft{}, fmt.Sprintf("revision %q names no git commit", include.Revision)
	}
	repo, err := open(include.Repository)
	if err != nil {
		return includedGraft{}, fmt.Sprintf("opening %s: %v", DisplayURL(include.Repository), err)
	}
	commit, err := repo.CommitObject(plumbing.NewHash(rev.Commit()))
	if err != nil {
		return includedGraft{}, fmt.Sprintf("commit %s is not in %s: %v", rev.Commit(), DisplayURL(include.Repository), err)
	}
	root, err := commit.Tree()
	if err != nil {
		return includedGraft{}, fmt.Sprintf("reading the tree of %s: %v", rev.Commit(), err)
	}
	entry := object.TreeEntry{Mode: filemode.Dir, Hash: root.Hash}
	if from := renderDir(include.FromPath); from != "." {
		found, err := root.FindEntry(from)
		if err != nil {
			return includedGraft{}, fmt.Sprintf("%q does not exist at %s", include.FromPath, rev.Commit())
		}
		entry = *found
	}
	return includedGraft{graft: graft{path: renderDir(include.ToPath), entry: entry}, repo: repo}, ""
}

// apply lays out the artifact of a commit whose tree is root: its
// submodules checked out, then the includes copied in (source-controller
// clones, then runs reconcileInclude).
func (l *layout) apply(root *object.Tree) (*object.Tree, error) {
	hash := root.Hash
	if l.submodules {
		var err error
		if hash, err = l.withSubmodules(root, l.origin, submoduleDepth); err != nil {
			return nil, err
		}
	}
	for _, g := range l.grafts {
		if _, err := root.FindEntry(g.path); err == nil {
			return nil, fmt.Errorf("an include's toPath %s exists in the commit: source-controller cannot copy onto it", g.path)
		}
		var err error
		if hash, err = l.storer.graft(hash, strings.Split(g.path, "/"), g.entry); err != nil {
			return nil, fmt.Errorf("%w: placing an include at %s: %w", errRepository, g.path, err)
		}
	}
	return object.GetTree(l.storer, hash)
}

// withSubmodules returns tree with each submodule .gitmodules names at a
// gitlink replaced by the submodule's tree at the linked commit, theirs in
// turn, depth levels down. A path .gitmodules names that is no gitlink is
// left as it is.
func (l *layout) withSubmodules(tree *object.Tree, url string, depth int) (plumbing.Hash, error) {
	file, err := tree.File(".gitmodules")
	switch {
	case depth == 0 || errors.Is(err, object.ErrFileNotFound):
		return tree.Hash, nil
	case err != nil:
		return plumbing.ZeroHash, fmt.Errorf("%w: reading .gitmodules: %w", errRepository, err)
	}
	content, err := file.Contents()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%w: reading .gitmodules: %w", errRepository, err)
	}
	modules := config.NewModules()
	if err := modules.Unmarshal([]byte(content)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("parsing .gitmodules: %w", err)
	}
	hash := tree.Hash
	for _, name := range slices.Sorted(maps.Keys(modules.Submodules)) {
		module := modules.Submodules[name]
		entry, err := tree.FindEntry(module.Path)
		if err != nil || entry.Mode != filemode.Submodule || !cleanPath(module.Path) {
			continue
		}
		checkedOut, err := l.submodule(module, entry.Hash, url, depth)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("submodule %s: %w", module.Path, err)
		}
		if hash, err = l.storer.graft(hash, strings.Split(renderDir(module.Path), "/"), object.TreeEntry{Mode: filemode.Dir, Hash: checkedOut}); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%w: placing submodule %s: %w", errRepository, module.Path, err)
		}
	}
	return hash, nil
}

// submodule is the tree of a submodule at the linked commit, with its own
// submodules.
func (l *layout) submodule(module *config.Submodule, commit plumbing.Hash, url string, depth int) (plumbing.Hash, error) {
	moduleURL := submoduleURL(url, module.URL)
	repo, err := l.open(moduleURL)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("opening %s: %w", DisplayURL(moduleURL), err)
	}
	l.storer.add(repo.Storer)
	linked, err := repo.CommitObject(commit)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s is not in %s: %w", commit, DisplayURL(moduleURL), err)
	}
	tree, err := linked.Tree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading the tree of %s: %w", commit, err)
	}
	return l.withSubmodules(tree, moduleURL, depth-1)
}

// submoduleURL resolves a submodule's URL as go-git does for a clone
// (v5.19.1 submodule.go, Repository): a relative one is joined to the path
// of the repository's own URL. Only "./" and "../" make a URL relative, as
// for git.
func submoduleURL(repository, url string) string {
	if !strings.HasPrefix(url, "./") && !strings.HasPrefix(url, "../") {
		return url
	}
	endpoint, err := transport.NewEndpoint(repository)
	if err != nil {
		return url
	}
	endpoint.Path = path.Join(endpoint.Path, url)
	return endpoint.String()
}

// overlay reads objects from the trees it wrote, then from each base.
type overlay struct {
	written storer.EncodedObjectStorer
	bases   []storer.EncodedObjectStorer
}

// add makes a repository's objects readable, once.
func (o *overlay) add(base storer.EncodedObjectStorer) {
	if !slices.Contains(o.bases, base) {
		o.bases = append(o.bases, base)
	}
}

var _ storer.EncodedObjectStorer = (*overlay)(nil)

// newOverlay returns an empty overlay over one repository's objects.
func newOverlay(base storer.EncodedObjectStorer) *overlay {
	return &overlay{written: &memory.NewStorage().ObjectStorage, bases: []storer.EncodedObjectStorer{base}}
}

// graft writes the tree that is tree with entry placed at parts, creating
// directories on the way and replacing what was there, and returns its
// hash. A zero tree is an empty one.
func (o *overlay) graft(tree plumbing.Hash, parts []string, entry object.TreeEntry) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !tree.IsZero() {
		t, err := object.GetTree(o, tree)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = slices.Clone(t.Entries)
	}
	placed := entry
	placed.Name = parts[0]
	at := slices.IndexFunc(entries, func(e object.TreeEntry) bool { return e.Name == parts[0] })
	if len(parts) > 1 {
		below := plumbing.ZeroHash
		if at >= 0 && entries[at].Mode == filemode.Dir {
			below = entries[at].Hash
		}
		hash, err := o.graft(below, parts[1:], entry)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		placed = object.TreeEntry{Name: parts[0], Mode: filemode.Dir, Hash: hash}
	}
	if at >= 0 {
		entries[at] = placed
	} else {
		entries = append(entries, placed)
	}
	// git orders entries by name, a directory's as if it ended in "/".
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(sortName(a), sortName(b)) })
	obj := o.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return o.SetEncodedObject(obj)
}

// sortName is the name git sorts a tree entry by.
func sortName(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// all are memory, then the bases.
func (o *overlay) all() []storer.EncodedObjectStorer {
	return append([]storer.EncodedObjectStorer{o.written}, o.bases...)
}

// NewEncodedObject returns an object to write into memory.
func (o *overlay) NewEncodedObject() plumbing.EncodedObject { return &plumbing.MemoryObject{} }

// SetEncodedObject writes into memory, never into a repository.
func (o *overlay) SetEncodedObject(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	return o.written.SetEncodedObject(obj)
}

// EncodedObject reads from memory, then from each base in turn.
func (o *overlay) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	for _, s := range o.all() {
		obj, err := s.EncodedObject(t, h)
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return obj, err
		}
	}
	return nil, plumbing.ErrObjectNotFound
}

// IterEncodedObjects lists the objects of memory and every base.
func (o *overlay) IterEncodedObjects(t plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	var iters []storer.EncodedObjectIter
	for _, s := range o.all() {
		iter, err := s.IterEncodedObjects(t)
		if err != nil {
			return nil, err
		}
		iters = append(iters, iter)
	}
	return storer.NewMultiEncodedObjectIter(iters), nil
}

// HasEncodedObject looks in memory, then in each base.
func (o *overlay) HasEncodedObject(h plumbing.Hash) error {
	for _, s := range o.all() {
		if err := s.HasEncodedObject(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
			return err
		}
	}
	return plumbing.ErrObjectNotFound
}

// EncodedObjectSize looks in memory, then in each base.
func (o *overlay) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	for _, s := range o.all() {
		size, err := s.EncodedObjectSize(h)
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return size, err
		}
	}
	return 0, plumbing.ErrObjectNotFound
}

// AddAlternate is refused: the overlay is read-only but for its trees.
func (o *overlay) AddAlternate(string) error {
	return errors.New("an overlay of repositories takes no alternates")
}
