package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// repoCache is one model's folder of a hub cache, as hf-hub 0.4 lays it
// out (src/lib.rs, Cache and CacheRepo): blobs/<etag>, snapshots/<commit>/
// <file> linking to its blob, and refs/<revision> holding a commit.
type repoCache struct {
	root     string
	revision string
}

// newRepoCache is the folder of modelID in dir, read at revision: its name
// is "models--" and the id with "/" replaced by "--" (Repo::folder_name).
func newRepoCache(dir, modelID, revision string) repoCache {
	folder := strings.ReplaceAll("models--"+modelID, "/", "--")
	return repoCache{root: filepath.Join(dir, folder), revision: revision}
}

// get finds file as CacheRepo::get does: refs/<revision> read as it is,
// then snapshots/<commit>/<file> must exist, links followed.
func (c repoCache) get(file string) (string, bool) {
	commit, err := os.ReadFile(filepath.Join(c.root, "refs", c.revision))
	if err != nil {
		return "", false
	}
	path := filepath.Join(c.root, "snapshots", string(commit), filepath.FromSlash(file))
	if _, err := os.Stat(path); err != nil {
		return "", false
	}
	return path, true
}

// put stores a downloaded file as hf-hub's ApiRepo::download does: the
// content into blobs/<blob>, a relative link to it at
// snapshots/<commit>/<file>, and commit into refs/<revision>
// (CacheRepo::create_ref). It returns the snapshot path.
func (c repoCache) put(commit, file, blob string, content io.Reader) (string, error) {
	blobPath := filepath.Join(c.root, "blobs", blob)
	if err := writeAtomically(blobPath, content); err != nil {
		return "", err
	}
	link := filepath.Join(c.root, "snapshots", commit, filepath.FromSlash(file))
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return "", err
	}
	target, err := filepath.Rel(filepath.Dir(link), blobPath)
	if err != nil {
		return "", err
	}
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	if err := os.Symlink(target, link); err != nil {
		return "", err
	}
	ref := filepath.Join(c.root, "refs", c.revision)
	if err := writeAtomically(ref, strings.NewReader(commit)); err != nil {
		return "", err
	}
	return link, nil
}

// writeAtomically writes content to path through a temporary file beside
// it, so a reader never sees part of it.
func writeAtomically(path string, content io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".incomplete-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := io.Copy(tmp, content); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
