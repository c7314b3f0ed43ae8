package audit

import (
	"bytes"
	"errors"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// accessKind is what a read of the filesystem depends on.
type accessKind uint8

const (
	// statAccess depends on whether a path exists and is a directory.
	statAccess accessKind = iota
	// fileAccess depends on a file's content, or on the path being a
	// directory (reading a directory fails the same way whatever is in it).
	fileAccess
	// treeAccess depends on a file's content or on everything under a
	// directory.
	treeAccess
)

// access is one read kustomize made, on a path relative to the repository
// root ("." is the root).
type access struct {
	kind accessKind
	path string
}

// treeFS is the filesystem kustomize sees: a commit's tree, copied into
// memory lazily (a directory's files when something in it is first
// touched), recording every read. Kustomize is deterministic, so a build
// over another tree that answers every recorded read the same way produces
// the same output: the recorded reads are the build's footprint.
//
// Regular and executable files and directories are copied; symbolic links
// and submodules are not, and read as absent.
type treeFS struct {
	mem      filesys.FileSystem
	root     *object.Tree
	objects  *objects
	listed   map[string]bool
	accesses map[access]bool
	// openAPI is set when a kustomization read may declare an openapi field.
	openAPI bool
	// err is the first failure reading the repository; a build that saw one
	// is not trusted.
	err error
}

var _ filesys.FileSystem = (*treeFS)(nil)

// newTreeFS returns an empty filesystem over a commit's root tree.
func newTreeFS(root *object.Tree, objs *objects) *treeFS {
	return &treeFS{
		mem:      filesys.MakeFsInMemory(),
		root:     root,
		objects:  objs,
		listed:   map[string]bool{},
		accesses: map[access]bool{},
	}
}

// relative is the repository path the in-memory filesystem resolves p to,
// or false when it resolves to nothing whatever the tree (an empty path, or
// one above the root).
func relative(p string) (string, bool) {
	if p == "" {
		return "", false
	}
	clean := filepath.ToSlash(filepath.Clean(filesys.StripLeadingSeps(p)))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

// touch records a read of p and copies in what answering it needs.
func (t *treeFS) touch(kind accessKind, p string) {
	rel, ok := relative(p)
	if !ok {
		return
	}
	t.accesses[access{kind: kind, path: rel}] = true
	switch kind {
	case treeAccess:
		t.copyTree(rel)
	case fileAccess:
		t.copyDir(path.Dir(rel))
		t.openAPI = t.openAPI || t.mentionsOpenAPI(rel)
	default:
		t.copyDir(path.Dir(rel))
	}
}

// mentionsOpenAPI reports whether p is a kustomization file with the word
// openapi in it; a conservative test for an openapi field.
func (t *treeFS) mentionsOpenAPI(p string) bool {
	if !slices.Contains(konfig.RecognizedKustomizationFileNames(), path.Base(p)) {
		return false
	}
	data, err := t.mem.ReadFile(p)
	return err == nil && bytes.Contains(data, []byte("openapi"))
}

// prepareWrite copies in the directory a write lands in, so copying it later
// cannot overwrite what was written.
func (t *treeFS) prepareWrite(p string) {
	if rel, ok := relative(p); ok {
		t.copyDir(path.Dir(rel))
	}
}

// copyDir copies a directory's files, and its subdirectories as empty
// directories, into memory, after its parents. A path that is not a
// directory in the tree copies nothing.
func (t *treeFS) copyDir(dir string) {
	if t.listed[dir] {
		return
	}
	if dir != "." {
		t.copyDir(path.Dir(dir))
	}
	t.listed[dir] = true
	entry, err := t.objects.lookup(t.root, dir)
	if err != nil || entry.Mode != filemode.Dir {
		t.fail(err)
		return
	}
	tree, err := t.objects.tree(entry.Hash)
	if err != nil {
		t.fail(err)
		return
	}
	for _, e := range tree.Entries {
		name := path.Join(dir, e.Name)
		switch {
		case e.Mode == filemode.Dir:
			t.fail(t.mem.MkdirAll(name))
		case e.Mode.IsFile() && e.Mode != filemode.Symlink:
			data, err := t.objects.blob(e.Hash)
			if err != nil {
				t.fail(err)
				continue
			}
			t.fail(t.mem.WriteFile(name, data))
		}
	}
}

// copyTree copies a directory and everything under it.
func (t *treeFS) copyTree(dir string) {
	t.copyDir(dir)
	entry, err := t.objects.lookup(t.root, dir)
	if err != nil || entry.Mode != filemode.Dir {
		t.fail(err)
		return
	}
	tree, err := t.objects.tree(entry.Hash)
	if err != nil {
		t.fail(err)
		return
	}
	for _, e := range tree.Entries {
		if e.Mode == filemode.Dir {
			t.copyTree(path.Join(dir, e.Name))
		}
	}
}

// fail keeps the first error that is not "absent".
func (t *treeFS) fail(err error) {
	if err != nil && !errors.Is(err, errAbsent) && t.err == nil {
		t.err = err
	}
}

// Create implements filesys.FileSystem.
func (t *treeFS) Create(p string) (filesys.File, error) {
	t.prepareWrite(p)
	return t.mem.Create(p)
}

// Mkdir implements filesys.FileSystem.
func (t *treeFS) Mkdir(p string) error {
	t.prepareWrite(p)
	return t.mem.Mkdir(p)
}

// MkdirAll implements filesys.FileSystem.
func (t *treeFS) MkdirAll(p string) error {
	t.prepareWrite(p)
	return t.mem.MkdirAll(p)
}

// RemoveAll implements filesys.FileSystem; what it removes is copied in
// first, so it stays removed.
func (t *treeFS) RemoveAll(p string) error {
	t.touch(treeAccess, p)
	return t.mem.RemoveAll(p)
}

// Open implements filesys.FileSystem. An opened directory tells its number
// of entries.
func (t *treeFS) Open(p string) (filesys.File, error) {
	t.touch(treeAccess, p)
	return t.mem.Open(p)
}

// IsDir implements filesys.FileSystem.
func (t *treeFS) IsDir(p string) bool {
	t.touch(statAccess, p)
	return t.mem.IsDir(p)
}

// ReadDir implements filesys.FileSystem.
func (t *treeFS) ReadDir(p string) ([]string, error) {
	t.touch(treeAccess, p)
	return t.mem.ReadDir(p)
}

// CleanedAbs implements filesys.FileSystem.
func (t *treeFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	t.touch(statAccess, p)
	return t.mem.CleanedAbs(p)
}

// Exists implements filesys.FileSystem.
func (t *treeFS) Exists(p string) bool {
	t.touch(statAccess, p)
	return t.mem.Exists(p)
}

// Glob implements filesys.FileSystem. A match has as many path segments as
// the pattern, so only the directory before the first wildcard matters.
func (t *treeFS) Glob(pattern string) ([]string, error) {
	t.touch(treeAccess, globDir(pattern))
	return t.mem.Glob(pattern)
}

// globDir is the longest directory of a pattern without wildcards.
func globDir(pattern string) string {
	dir := filepath.ToSlash(pattern)
	for strings.ContainsAny(dir, `*?[\`) {
		dir = path.Dir(dir)
	}
	if dir == "" || dir == "." {
		return "/"
	}
	return dir
}

// ReadFile implements filesys.FileSystem.
func (t *treeFS) ReadFile(p string) ([]byte, error) {
	t.touch(fileAccess, p)
	return t.mem.ReadFile(p)
}

// WriteFile implements filesys.FileSystem.
func (t *treeFS) WriteFile(p string, data []byte) error {
	t.prepareWrite(p)
	return t.mem.WriteFile(p, data)
}

// Walk implements filesys.FileSystem.
func (t *treeFS) Walk(p string, walkFn filepath.WalkFunc) error {
	t.touch(treeAccess, p)
	return t.mem.Walk(p, walkFn)
}

// errAbsent means a path is not in a tree (or not as a file or directory).
var errAbsent = errors.New("absent")

// maxCachedTrees bounds the decoded trees kept: enough for the directories
// a build reads across a long history, without keeping every root tree.
const maxCachedTrees = 4096

// objects reads trees and blobs, keeping decoded trees by hash: the
// directories a build reads rarely change from one commit to the next.
type objects struct {
	storer storer.EncodedObjectStorer
	trees  map[plumbing.Hash]*object.Tree
}

// newObjects reads from a repository's object storage.
func newObjects(s storer.EncodedObjectStorer) *objects {
	return &objects{storer: s, trees: map[plumbing.Hash]*object.Tree{}}
}

// tree returns a decoded tree.
func (o *objects) tree(h plumbing.Hash) (*object.Tree, error) {
	if tree, ok := o.trees[h]; ok {
		return tree, nil
	}
	tree, err := object.GetTree(o.storer, h)
	if err != nil {
		return nil, err
	}
	if len(o.trees) >= maxCachedTrees {
		clear(o.trees)
	}
	o.trees[h] = tree
	return tree, nil
}

// blob returns a file's content.
func (o *objects) blob(h plumbing.Hash) ([]byte, error) {
	blob, err := object.GetBlob(o.storer, h)
	if err != nil {
		return nil, err
	}
	reader, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer func() { _ = reader.Close() }()
	return io.ReadAll(reader)
}

// lookup finds the entry at a path relative to root ("." is root itself),
// or errAbsent.
func (o *objects) lookup(root *object.Tree, p string) (object.TreeEntry, error) {
	entry := object.TreeEntry{Mode: filemode.Dir, Hash: root.Hash}
	if p == "." {
		return entry, nil
	}
	tree := root
	for i, name := range strings.Split(p, "/") {
		if i > 0 {
			if entry.Mode != filemode.Dir {
				return object.TreeEntry{}, errAbsent
			}
			var err error
			if tree, err = o.tree(entry.Hash); err != nil {
				return object.TreeEntry{}, err
			}
		}
		found, err := tree.FindEntry(name)
		if err != nil {
			return object.TreeEntry{}, errAbsent
		}
		entry = *found
	}
	if entry.Mode != filemode.Dir && (!entry.Mode.IsFile() || entry.Mode == filemode.Symlink) {
		return object.TreeEntry{}, errAbsent
	}
	return entry, nil
}

// token is what an access saw in a tree: "d" or "f" for a stat, "d" for a
// file read of a directory, the object hash for a file or a tree, "-" when
// absent.
func (o *objects) token(root *object.Tree, a access) (string, error) {
	entry, err := o.lookup(root, a.path)
	dir := entry.Mode == filemode.Dir
	switch {
	case errors.Is(err, errAbsent):
		return "-", nil
	case err != nil:
		return "", err
	case a.kind == statAccess && !dir:
		return "f", nil
	case a.kind == statAccess, a.kind == fileAccess && dir:
		return "d", nil
	default:
		return entry.Mode.String() + entry.Hash.String(), nil
	}
}
