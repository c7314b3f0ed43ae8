package populate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// ErrNotInCache is wrapped when a cache the user filled lacks the model at
// the revision: refs/<revision>, the snapshot it names, or a file TEI
// reads. The message names which.
var ErrNotInCache = errors.New("the model is not in the cache")

// VerifyOffline checks, without the hub and without writing, that the cache
// in opts.Dir holds opts.Model at opts.Revision as TEI finds it there, and
// returns what it holds (no content digest: nothing is hashed). It follows
// hf-hub 0.4's CacheRepo::get (src/lib.rs), TEI's lookup before any
// download: refs/<revision> is read as it is, without trimming, and must
// hold a commit id, also when the revision is one; snapshots/<commit> must
// hold the files TEI reads (teiReads: config.json, tokenizer.json and
// weights one of the image's backends loads; opts.Image and
// opts.AllBackends as for Run), links followed to their blobs. It is what
// `embedops populate --verify-only` runs on a spec.cache.existingClaim.
func VerifyOffline(ctx context.Context, opts Options) (*Result, error) {
	if err := validModelAndRevision(&opts); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: no cache directory", ErrInvalid)
	}
	repo := newCacheRepo(opts.Dir, opts.Model)
	ref := filepath.Join(repo.folder, "refs", opts.Revision)
	data, err := os.ReadFile(repo.refPath(opts.Revision))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: no %s: the cache does not name a commit for revision %q", ErrNotInCache, ref, opts.Revision)
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	commit := string(data)
	if !isCommit(commit) {
		return nil, fmt.Errorf("%w: %s holds %q, not a bare commit id (TEI's hf-hub reads it as it is)", ErrNotInCache, ref, commit)
	}
	listed, bytes, err := snapshotFiles(ctx, repo, commit)
	if err != nil {
		return nil, err
	}
	backends, _ := BackendsOf(opts.Image)
	if opts.AllBackends {
		backends = nil
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(repo.snapshotPath(commit, name)) }
	if _, err := teiReads(listed, backends, read); err != nil {
		return nil, fmt.Errorf("%w: snapshots/%s: %w", ErrNotInCache, commit, err)
	}
	return &Result{ResolvedCommit: commit, Files: len(listed), Bytes: bytes, Names: listed}, nil
}

// snapshotFiles lists the files of snapshots/<commit>, by their "/"-separated
// path in the repository, sorted, and their total size. A link to a missing
// blob is an error: TEI would ask the hub for the file.
func snapshotFiles(ctx context.Context, repo cacheRepo, commit string) ([]string, int64, error) {
	root := repo.snapshotPath(commit, "")
	snapshot := filepath.Join(repo.folder, "snapshots", commit)
	if info, err := os.Stat(root); err != nil || !info.IsDir() {
		return nil, 0, fmt.Errorf("%w: no %s, the snapshot refs names", ErrNotInCache, snapshot)
	}
	var names []string
	var bytes int64
	err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if entry.IsDir() {
			return nil
		}
		name, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := os.Stat(path) // follows the link to the blob
		if err != nil {
			return fmt.Errorf("%w: %s/%s links to no readable blob: %w", ErrNotInCache, snapshot, filepath.ToSlash(name), err)
		}
		if info.IsDir() {
			return nil
		}
		names = append(names, filepath.ToSlash(name))
		bytes += info.Size()
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	slices.Sort(names)
	return names, bytes, nil
}
