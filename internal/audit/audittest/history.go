// Package audittest builds the git histories that the audit tests and
// benchmarks walk: deterministic commits of a GitOps layout, written as one
// packfile into a bare repository, as a clone would have them. It is not
// test code so that `make bench` can generate the same histories.
package audittest

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Epoch is when the first commit of a history is authored; each later
// commit is a day later.
var Epoch = time.Date(2025, time.March, 1, 9, 30, 0, 0, time.UTC)

// History builds commits in memory, one file map per commit, with fixed
// authors and dates. The first error is kept: later calls do nothing and
// Err and Save return it.
type History struct {
	objects *memory.Storage
	files   map[string]string
	head    plumbing.Hash
	count   int
	err     error
}

// NewHistory starts an empty history.
func NewHistory() *History {
	return &History{objects: memory.NewStorage(), files: map[string]string{}}
}

// Err is the first error of any call so far.
func (h *History) Err() error { return h.err }

// Change edits the files of the next commit.
type Change func(files map[string]string)

// Write sets a file's content.
func Write(name, content string) Change {
	return func(files map[string]string) { files[name] = content }
}

// Remove deletes every file under a path.
func Remove(prefix string) Change {
	return func(files map[string]string) {
		for name := range files {
			if name == prefix || strings.HasPrefix(name, prefix+"/") {
				delete(files, name)
			}
		}
	}
}

// Commit applies changes, commits them and returns the commit id, or ""
// after an error.
func (h *History) Commit(subject string, changes ...Change) string {
	if h.err != nil {
		return ""
	}
	for _, c := range changes {
		c(h.files)
	}
	tree := h.tree(".", h.files)
	author := object.Signature{
		Name:  fmt.Sprintf("Dev %d", h.count),
		Email: "dev@example.com",
		When:  Epoch.Add(time.Duration(h.count) * 24 * time.Hour),
	}
	c := &object.Commit{Author: author, Committer: author, Message: subject + "\n\nBody.\n", TreeHash: tree}
	if !h.head.IsZero() {
		c.ParentHashes = []plumbing.Hash{h.head}
	}
	h.head = h.store(c.Encode)
	h.count++
	if h.err != nil {
		return ""
	}
	return h.head.String()
}

// Forget drops a commit's object, as a shallow clone lacks the commits
// beyond its depth.
func (h *History) Forget(commit string) {
	hash := plumbing.NewHash(commit)
	delete(h.objects.Objects, hash)
	delete(h.objects.Commits, hash)
}

// Save writes every object into a new bare repository in dir, packed, with
// main (and HEAD) at the last commit.
func (h *History) Save(dir string) (*git.Repository, error) {
	if h.err != nil {
		return nil, h.err
	}
	repo, err := git.PlainInit(dir, true)
	if err == nil {
		err = h.pack(repo)
	}
	main := plumbing.NewHashReference("refs/heads/main", h.head)
	if err == nil {
		err = repo.Storer.SetReference(main)
	}
	if err == nil {
		err = repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, main.Name()))
	}
	if err != nil {
		return nil, fmt.Errorf("saving the history: %w", err)
	}
	return repo, nil
}

// pack writes every object into one packfile of repo.
func (h *History) pack(repo *git.Repository) error {
	var hashes []plumbing.Hash
	iter, err := h.objects.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		return err
	}
	err = iter.ForEach(func(obj plumbing.EncodedObject) error {
		hashes = append(hashes, obj.Hash())
		return nil
	})
	if err != nil {
		return err
	}
	w, err := repo.Storer.(storer.PackfileWriter).PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := packfile.NewEncoder(w, h.objects, false).Encode(hashes, 10); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// tree stores the tree of files under dir and returns its hash.
func (h *History) tree(dir string, files map[string]string) plumbing.Hash {
	entries := map[string]object.TreeEntry{}
	subdirs := map[string]map[string]string{}
	for name, content := range files {
		first, rest, nested := strings.Cut(name, "/")
		if nested {
			if subdirs[first] == nil {
				subdirs[first] = map[string]string{}
			}
			subdirs[first][rest] = content
			continue
		}
		entries[first] = object.TreeEntry{Name: first, Mode: filemode.Regular, Hash: h.blob(content)}
	}
	for name, sub := range subdirs {
		entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h.tree(path.Join(dir, name), sub)}
	}
	t := &object.Tree{}
	for _, e := range entries {
		t.Entries = append(t.Entries, e)
	}
	// Git orders a directory as if its name ended in "/".
	sortName := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(t.Entries, func(i, j int) bool { return sortName(t.Entries[i]) < sortName(t.Entries[j]) })
	return h.store(t.Encode)
}

// blob stores a file's content.
func (h *History) blob(content string) plumbing.Hash {
	return h.store(func(obj plumbing.EncodedObject) error {
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, content); err != nil {
			return err
		}
		return w.Close()
	})
}

// store encodes an object into the repository, keeping the first error.
func (h *History) store(encode func(plumbing.EncodedObject) error) plumbing.Hash {
	if h.err != nil {
		return plumbing.ZeroHash
	}
	obj := h.objects.NewEncodedObject()
	if err := encode(obj); err != nil {
		h.err = fmt.Errorf("encoding a git object: %w", err)
		return plumbing.ZeroHash
	}
	hash, err := h.objects.SetEncodedObject(obj)
	if err != nil {
		h.err = fmt.Errorf("storing a git object: %w", err)
	}
	return hash
}
