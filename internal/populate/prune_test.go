package populate_test

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// revisionWeights is the size of each revision's own weights: a tmpfs of
// volumeBytes holds two revisions' but not three.
const (
	revisionWeights = 2 << 20
	volumeBytes     = 5 << 20
)

// sizedVolume mounts a tmpfs of size bytes for the test and unmounts it
// when the test ends, also on failure.
func sizedVolume(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Skipf("mounting a size-limited tmpfs needs root: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// revisionFiles are testModel at revision n: shared config and tokenizer,
// and weights of its own.
func revisionFiles(n int) []hubtest.File {
	data := make([]byte, revisionWeights)
	_, _ = rand.NewChaCha8([32]byte{byte(n + 10)}).Read(data)
	files := modelFiles()
	files[len(files)-1] = hubtest.File{Name: "model.safetensors", Data: data, LFS: true}
	return files
}

// TestRunPrunesSoRevisionsKeepFitting changes the revision three times on
// a volume that holds two: each run keeps the revision it fetches and the
// one the last run left, so none runs out of space; without pruning the
// third revision does.
func TestRunPrunesSoRevisionsKeepFitting(t *testing.T) {
	for _, prune := range []bool{true, false} {
		t.Run("prune="+strconv.FormatBool(prune), func(t *testing.T) {
			g := NewWithT(t)
			dir := sizedVolume(t, volumeBytes)
			hub := hubtest.New(t)
			opts := options(t, hub, dir, &sleeper{})
			opts.Prune = prune
			var commits []string
			for n := range 4 {
				commit := hub.AddCommit(testModel, "main", revisionFiles(n)...)
				commits = append(commits, commit)
				opts.Revision = commit
				result, err := populate.Run(context.Background(), opts)
				if !prune && n == 2 {
					g.Expect(err).To(MatchError(populate.ErrDiskFull), "the volume holds two revisions, not three")
					return
				}
				g.Expect(err).NotTo(HaveOccurred(), "revision %d", n)
				kept := commits[max(0, n-1):]
				expectSnapshots(g, dir, kept)
				expectValidLayout(g, dir)
				for _, c := range kept {
					opts := opts
					opts.Revision = c
					_, err := populate.VerifyOffline(context.Background(), opts)
					g.Expect(err).NotTo(HaveOccurred(), "TEI's lookup finds the kept revision %s", c)
				}
				if prune {
					g.Expect(result.FreeBytes).To(HaveValue(BeNumerically("~", volumeBytes-len(kept)*revisionWeights, 1<<20)),
						"statfs counts what the kept revisions leave free")
					want := int64(0)
					if n > 0 {
						want = revisionWeights // what the next run prunes: the older revision's weights
					}
					g.Expect(result.ReclaimableBytes).To(HaveValue(Equal(want)))
				}
			}
			g.Expect(prune).To(BeTrue(), "without pruning the third revision must not fit")
		})
	}
}

// expectSnapshots checks that the cache holds the snapshots of commits
// and no other.
func expectSnapshots(g Gomega, dir string, commits []string) {
	entries, err := os.ReadDir(filepath.Join(repoDir(dir), "snapshots"))
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	g.Expect(names).To(ConsistOf(commits))
}

// expectValidLayout checks the cache as huggingface_hub's scan_cache_dir
// and hf-hub read it (utils/_cache_manager.py, src/lib.rs CacheRepo::get):
// every ref names a snapshot that exists, every link of a snapshot reaches
// its blob, and every blob is linked by a snapshot (pruning left no orphan).
func expectValidLayout(g Gomega, dir string) {
	root := repoDir(dir)
	err := filepath.WalkDir(filepath.Join(root, "refs"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(filepath.Join(root, "snapshots", strings.TrimSpace(string(data)))).To(BeADirectory(), "ref %s", path)
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	linked := map[string]bool{}
	err = filepath.WalkDir(filepath.Join(root, "snapshots"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.Type()&fs.ModeSymlink == 0 {
			return err
		}
		g.Expect(path).To(BeARegularFile(), "the link %s reaches its blob", path)
		target, _ := os.Readlink(path)
		linked[filepath.Base(target)] = true
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	blobs, err := os.ReadDir(filepath.Join(root, "blobs"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, b := range blobs {
		g.Expect(linked).To(HaveKey(b.Name()), "blob %s is linked", b.Name())
	}
}

// A revision that returns to an older one's weights keeps them through the
// pruning that makes room for it: they are not downloaded again.
func TestRunKeepsTheBlobsTheNewRevisionLists(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	hub := hubtest.New(t)
	opts := options(t, hub, dir, &sleeper{})
	opts.Prune = true
	var commits []string
	for _, n := range []int{0, 1, 0} {
		files := append(revisionFiles(n), hubtest.File{Name: "README.md", Data: []byte("revision " + strconv.Itoa(len(commits)))})
		commits = append(commits, hub.AddCommit(testModel, "main", files...))
		opts.Revision = commits[len(commits)-1]
		_, err := populate.Run(context.Background(), opts)
		g.Expect(err).NotTo(HaveOccurred())
	}
	expectSnapshots(g, dir, commits[1:])
	expectValidLayout(g, dir)
	g.Expect(requestsTo(hub, "/cdn-lfs/")).To(HaveLen(2), "the first weights are fetched once, then the second's")
}

// A damaged manifest does not say which blobs its snapshot names: that
// snapshot is kept, and the run goes on.
func TestRunKeepsASnapshotWhoseManifestIsDamaged(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	hub := hubtest.New(t)
	opts := options(t, hub, dir, &sleeper{})
	opts.Prune = true
	var commits []string
	for n := range 3 {
		if n == 2 {
			manifest := filepath.Join(repoDir(dir), ".embedops", commits[0]+".json")
			g.Expect(os.WriteFile(manifest, []byte("{"), 0o644)).To(Succeed())
		}
		commits = append(commits, hub.AddCommit(testModel, "main", revisionFiles(n)...))
		opts.Revision = commits[n]
		_, err := populate.Run(context.Background(), opts)
		g.Expect(err).NotTo(HaveOccurred())
	}
	expectSnapshots(g, dir, commits)
}

// A cache filled without a record of the last run (by an earlier release,
// or by runs without --prune) keeps the snapshot whose manifest was
// written last through the first pruning run: the revision its pod served,
// which a rollback returns to.
func TestRunKeepsTheNewestSnapshotOfACacheWithoutARecord(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	hub := hubtest.New(t)
	opts := options(t, hub, dir, &sleeper{})
	var commits []string
	for n := range 3 {
		commits = append(commits, hub.AddCommit(testModel, "main", revisionFiles(n)...))
		opts.Revision = commits[n]
		_, err := populate.Run(context.Background(), opts)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(filepath.Join(repoDir(dir), ".embedops", "latest")).NotTo(BeAnExistingFile(), "runs without Prune record nothing")
	// Written an hour apart, the second last: the order of the writes, not
	// of the commits, says which the pod served.
	now := time.Now()
	for i, age := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
		manifest := filepath.Join(repoDir(dir), ".embedops", commits[i]+".json")
		g.Expect(os.Chtimes(manifest, now.Add(-age), now.Add(-age))).To(Succeed())
	}

	opts.Prune = true
	commits = append(commits, hub.AddCommit(testModel, "main", revisionFiles(3)...))
	opts.Revision = commits[3]
	_, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	expectSnapshots(g, dir, []string{commits[1], commits[3]})
	expectValidLayout(g, dir)
}
