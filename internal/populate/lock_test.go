//go:build unix

package populate_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// holdLock takes the exclusive advisory lock another populator would hold
// on path, and returns the function that releases it.
func holdLock(g Gomega, path string) func() {
	return holdLockAs(g, path, syscall.LOCK_EX)
}

// holdLockAs takes the advisory lock on path as how (syscall.LOCK_EX or
// LOCK_SH) says, and returns the function that releases it.
func holdLockAs(g Gomega, path string, how int) func() {
	g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)).To(Succeed())
	return func() { _ = f.Close() }
}

// A pruning run holds the model's folder alone: it waits for every other
// run, and the others wait for it; runs that do not prune share the
// folder. Each case holds the folder's lock as another run would, and the
// run released it at its first wait.
func TestRunHoldsTheModelFolder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  int // how another run holds the folder
		prune bool
		waits int
	}{
		{"pruning run waits for a run sharing the folder", syscall.LOCK_SH, true, 1},
		{"pruning run waits for a pruning run", syscall.LOCK_EX, true, 1},
		{"run waits for a pruning run", syscall.LOCK_EX, false, 1},
		{"runs share the folder", syscall.LOCK_SH, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			hub := hubtest.New(t)
			opts := options(t, hub, dir, &sleeper{})
			opts.Prune = true
			commits := fetchRevisions(g, hub, opts, revisionFiles(0), revisionFiles(1))
			release := holdLockAs(g, filepath.Join(dir, ".locks", "models--org--embed", "folder.lock"), tc.held)
			defer release()
			s := &sleeper{onSleep: release}
			opts = options(t, hub, dir, s)
			opts.Prune = tc.prune
			opts.Revision = hub.AddCommit(testModel, "main", revisionFiles(2)...)

			_, err := populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.recorded()).To(HaveLen(tc.waits))
			kept := append(commits, opts.Revision)
			if tc.prune {
				kept = kept[1:]
			}
			expectSnapshots(g, dir, kept)
		})
	}
}

func TestRunWaitsForAnotherPopulator(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	dir := t.TempDir()
	config := fileNamed(modelFiles(), "config.json")
	release := holdLock(g, filepath.Join(dir, ".locks", "models--org--embed", blobName(config)+".lock"))
	s := &sleeper{onSleep: release}

	_, err := populate.Run(context.Background(), options(t, hub, dir, s))

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.recorded()).To(HaveLen(1), "waited once, then the lock was free")
	expectCached(g, dir, commit, modelFiles())
}

func TestRunStopsWaitingWhenCancelled(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	dir := t.TempDir()
	release := holdLock(g, filepath.Join(dir, ".locks", "models--org--embed", blobName(fileNamed(modelFiles(), "config.json"))+".lock"))
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	s := &sleeper{onSleep: cancel}

	_, err := populate.Run(ctx, options(t, hub, dir, s))

	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(leftovers(g, dir)).To(BeEmpty())
}

func TestConcurrentRunsShareTheCache(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	dir := t.TempDir()
	const runs = 4
	results := make([]*populate.Result, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			results[i], errs[i] = populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))
		})
	}
	wg.Wait()

	for i := range runs {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(results[i]).To(Equal(results[0]))
	}
	expectCached(g, dir, commit, modelFiles())
}
