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
)

// holdLock takes the advisory lock another populator would hold on path, and
// returns the function that releases it.
func holdLock(g Gomega, path string) func() {
	g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)).To(Succeed())
	return func() { _ = f.Close() }
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
