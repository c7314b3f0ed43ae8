package populate_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

// copyCache copies a cache directory as a volume clone does: modes,
// symlinks and all.
func copyCache(t *testing.T, g Gomega, dir string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	out, err := exec.Command("cp", "-a", dir, clone).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	return clone
}

// TestRunOnACopiedCacheHashesEveryFile starts from a claim cloned from
// another replica's, one of whose blobs was damaged after the copy but
// kept its size (what a size check misses): the run sees the other
// filler, hashes every file, downloads the damaged one again and says
// where the copy came from. The next run on that claim trusts it as its
// own.
func TestRunOnACopiedCacheHashesEveryFile(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(map[bool]string{false: "intact", true: "damaged"}[damaged], func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			opts := options(t, hub, t.TempDir(), &sleeper{})
			opts.Revision, opts.Filler = commit, "tei-0"
			first, err := populate.Run(context.Background(), opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(first.CopiedFrom).To(BeEmpty())

			opts.Dir, opts.Filler = copyCache(t, g, opts.Dir), "tei-1"
			if damaged {
				flipByte(g, weightsBlob(opts.Dir), 300_000)
			}
			downloads := len(requestsTo(hub, "/cdn-lfs/"))
			copied, err := populate.Run(context.Background(), opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(copied.CopiedFrom).To(Equal("tei-0"))
			g.Expect(copied.ContentDigest).To(Equal(first.ContentDigest))
			expectCached(g, opts.Dir, commit, modelFiles())
			redownloaded := len(requestsTo(hub, "/cdn-lfs/")) - downloads
			if damaged {
				g.Expect(redownloaded).To(Equal(1), "the damaged blob is downloaded again")
			} else {
				g.Expect(redownloaded).To(BeZero(), "an intact copy needs nothing from the hub")
			}

			requests := len(hub.Requests())
			again, err := populate.Run(context.Background(), opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again.CopiedFrom).To(BeEmpty(), "the claim's own run left it")
			g.Expect(hub.Requests()).To(HaveLen(requests), "a commit its own run left complete is not asked for")
		})
	}
}

// TestRunWithoutAFillerRecordTrustsTheCache: a cache filled before fillers
// were recorded (an earlier release's) is this replica's own.
func TestRunWithoutAFillerRecordTrustsTheCache(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	opts := options(t, hub, t.TempDir(), &sleeper{})
	opts.Revision = commit
	_, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())

	opts.Filler = "tei-1"
	result, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.CopiedFrom).To(BeEmpty())
}
