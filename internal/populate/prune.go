package populate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Pruning follows huggingface_hub's rule for deleting a cached revision
// (v0.26.0 src/huggingface_hub/utils/_cache_manager.py,
// HFCacheInfo.delete_revisions): the snapshot folder goes, with the refs
// that point at it and the blobs no other snapshot links; the rest of
// models--org--name/{blobs,snapshots,refs} stays as hf-hub and
// huggingface_hub read it. Only snapshots a manifest marks complete (those
// a populator wrote) are pruned, never one another program put there.

// latestName is the file under .embedops that names the commit the last
// successful run left in the cache: the one the pod that ran it served.
const latestName = "latest"

// pruning is what pruning every complete snapshot but a few frees.
type pruning struct {
	// commits are the snapshots that go.
	commits []string
	// blobs are the blobs only those snapshots name.
	blobs []string
	// bytes is the size of blobs.
	bytes int64
}

// latestPath is the file that names the commit of the last successful run.
func (c cacheRepo) latestPath() string { return filepath.Join(c.root(), ".embedops", latestName) }

// writeLatest records commit as the last one a run left complete.
func (c cacheRepo) writeLatest(commit string) error {
	if current, err := os.ReadFile(c.latestPath()); err == nil && string(current) == commit {
		return nil
	}
	return writeFile(c.latestPath(), []byte(commit))
}

// readLatest is the commit of the last successful run, "" if none is
// recorded.
func (c cacheRepo) readLatest() string {
	data, err := os.ReadFile(c.latestPath())
	if err != nil || !isCommit(string(data)) {
		return ""
	}
	return string(data)
}

// lastLeft are the commits the last run left, other than except: the one
// .embedops/latest names. A cache filled before populators recorded it (an
// earlier release's, or by runs without Prune) has none, and then the
// snapshots whose manifests were written last stand for it, all of them
// when several were written at the same time: pruning never takes the
// revision a pod may still serve on a guess.
func (c cacheRepo) lastLeft(except string) []string {
	if latest := c.readLatest(); latest != "" {
		return []string{latest}
	}
	commits, err := c.completeCommits()
	if err != nil {
		return nil
	}
	var newest []string
	var newestTime time.Time
	for _, commit := range slices.DeleteFunc(commits, func(other string) bool { return other == except }) {
		info, err := os.Stat(c.manifestPath(commit))
		if err != nil {
			continue
		}
		switch written := info.ModTime(); {
		case written.After(newestTime):
			newest, newestTime = []string{commit}, written
		case written.Equal(newestTime):
			newest = append(newest, commit)
		}
	}
	return newest
}

// completeCommits are the commits whose manifest marks a snapshot complete.
func (c cacheRepo) completeCommits() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(c.root(), ".embedops"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the manifests: %w", err)
	}
	var commits []string
	for _, e := range entries {
		if commit, ok := strings.CutSuffix(e.Name(), ".json"); ok && isCommit(commit) {
			commits = append(commits, commit)
		}
	}
	return commits, nil
}

// planPruning is what pruning every complete snapshot but keep frees: the
// blobs the pruned manifests name that no other snapshot links (a kept
// one, one a populator left incomplete, or another program's), that no
// kept manifest names (a kept snapshot missing a link still needs its
// blob), and that are not among wanted, the blobs the commit being
// fetched lists.
func (c cacheRepo) planPruning(keep []string, wanted map[string]bool) (pruning, error) {
	commits, err := c.completeCommits()
	if err != nil {
		return pruning{}, err
	}
	var plan pruning
	named, kept := map[string]bool{}, map[string]bool{}
	for _, commit := range commits {
		m, ok, err := c.readManifest(commit)
		if err != nil || !ok {
			continue // a damaged manifest does not say what its snapshot names: kept, its links count
		}
		blobs := named
		if slices.Contains(keep, commit) {
			blobs = kept
		} else {
			plan.commits = append(plan.commits, commit)
		}
		for _, f := range m.Files {
			blobs[f.Blob] = true
		}
	}
	if len(plan.commits) == 0 {
		return plan, nil
	}
	linked, err := c.linkedBlobs(plan.commits)
	if err != nil {
		return pruning{}, err
	}
	for blob := range named {
		if linked[blob] || kept[blob] || wanted[blob] {
			continue
		}
		info, err := os.Stat(c.blobPath(blob))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return pruning{}, fmt.Errorf("reading %s: %w", c.blobPath(blob), err)
		}
		plan.blobs = append(plan.blobs, blob)
		plan.bytes += info.Size()
	}
	slices.Sort(plan.blobs)
	return plan, nil
}

// linkedBlobs are the blobs the links of every snapshot but those of
// pruned point at.
func (c cacheRepo) linkedBlobs(pruned []string) (map[string]bool, error) {
	root := filepath.Join(c.root(), "snapshots")
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the snapshots: %w", err)
	}
	linked := map[string]bool{}
	for _, e := range entries {
		if slices.Contains(pruned, e.Name()) {
			continue
		}
		err := filepath.WalkDir(filepath.Join(root, e.Name()), func(p string, entry fs.DirEntry, err error) error {
			if err != nil || entry.Type()&fs.ModeSymlink == 0 {
				return err
			}
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			linked[path.Base(filepath.ToSlash(target))] = true
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading snapshot %s: %w", e.Name(), err)
		}
	}
	return linked, nil
}

// prune deletes what plan names, in the order that leaves a valid cache
// at every step: the refs that name a pruned commit (hf-hub then finds
// no snapshot for them, as for a revision never fetched), the snapshot
// folders, the blobs, and last the manifests, so a run that stops half
// way plans the rest again.
func (c cacheRepo) prune(plan pruning) error {
	if err := c.removeRefsTo(plan.commits); err != nil {
		return err
	}
	for _, commit := range plan.commits {
		if err := os.RemoveAll(c.snapshotPath(commit, "")); err != nil {
			return fmt.Errorf("removing snapshot %s: %w", commit, err)
		}
	}
	for _, blob := range plan.blobs {
		if err := os.Remove(c.blobPath(blob)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing blob %s: %w", blob, err)
		}
	}
	for _, commit := range plan.commits {
		if err := os.Remove(c.manifestPath(commit)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the manifest of %s: %w", commit, err)
		}
	}
	return nil
}

// removeRefsTo removes every ref (refs/main, refs/pr/1, refs/<commit>)
// that names one of commits.
func (c cacheRepo) removeRefsTo(commits []string) error {
	root := filepath.Join(c.root(), "refs")
	err := filepath.WalkDir(root, func(p string, entry fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return fs.SkipAll
		}
		if err != nil || entry.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if slices.Contains(commits, strings.TrimSpace(string(data))) {
			return os.Remove(p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("removing the refs of pruned snapshots: %w", err)
	}
	return nil
}
