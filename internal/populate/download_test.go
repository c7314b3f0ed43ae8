package populate_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

func TestRunRefusesACorruptedBody(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		message string
	}{
		{"LFS file checked by sha256", "model.safetensors", "model.safetensors has sha256"},
		{"regular file checked by git blob id", "tokenizer.json", "tokenizer.json has git blob id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			hub.Corrupt(tc.file)
			dir := t.TempDir()
			s := &sleeper{}

			_, err := populate.Run(context.Background(), options(t, hub, dir, s))

			g.Expect(err).To(MatchError(populate.ErrCorrupt))
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			g.Expect(s.recorded()).To(BeEmpty(), "a fresh download that fails verification is not retried")
			blob := filepath.Join(repoDir(dir), "blobs", blobName(fileNamed(modelFiles(), tc.file)))
			g.Expect(blob).NotTo(BeAnExistingFile(), "nothing at the final path")
			g.Expect(blob + ".incomplete").NotTo(BeAnExistingFile())
			g.Expect(filepath.Join(repoDir(dir), "snapshots", commit, tc.file)).NotTo(BeAnExistingFile())
			g.Expect(filepath.Join(repoDir(dir), ".embedops")).NotTo(BeADirectory(), "no manifest")
		})
	}
}

func TestRunResumesAnInterruptedDownload(t *testing.T) {
	weightsFile := fileNamed(modelFiles(), "model.safetensors")
	partial := func(dir string) string {
		return filepath.Join(repoDir(dir), "blobs", blobName(weightsFile)+".incomplete")
	}
	writePartial := func(g Gomega, dir string, data []byte) {
		g.Expect(os.MkdirAll(filepath.Dir(partial(dir)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(partial(dir), data, 0o644)).To(Succeed())
	}
	garbage := make([]byte, 1000)
	cases := []struct {
		name       string
		setup      func(g Gomega, dir string)
		cut        int
		wantRanges []string
		wantWaits  int
	}{
		{
			name:       "connection dropped mid-body",
			setup:      func(Gomega, string) {},
			cut:        250_000,
			wantRanges: []string{"", "bytes=250000-"},
			wantWaits:  1,
		},
		{
			name:       "partial file left by an earlier run",
			setup:      func(g Gomega, dir string) { writePartial(g, dir, weightsFile.Data[:100_000]) },
			wantRanges: []string{"bytes=100000-"},
		},
		{
			name:       "complete partial file renamed without a request",
			setup:      func(g Gomega, dir string) { writePartial(g, dir, weightsFile.Data) },
			wantRanges: nil,
		},
		{
			name:       "damaged partial file restarted from zero",
			setup:      func(g Gomega, dir string) { writePartial(g, dir, garbage) },
			wantRanges: []string{"bytes=1000-", ""},
			wantWaits:  1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			dir := t.TempDir()
			tc.setup(g, dir)
			if tc.cut > 0 {
				hub.CutNext(weightsFile.Name, tc.cut)
			}
			s := &sleeper{}

			result, err := populate.Run(context.Background(), options(t, hub, dir, s))

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(result.ContentDigest).To(Equal(digestOf(modelFiles())))
			expectCached(g, dir, commit, modelFiles())
			var ranges []string
			for _, r := range requestsTo(hub, "/cdn-lfs/") {
				ranges = append(ranges, r.Range)
			}
			g.Expect(ranges).To(Equal(tc.wantRanges), "the hub saw these Range headers for the LFS file")
			g.Expect(s.recorded()).To(HaveLen(tc.wantWaits))
		})
	}
}

func TestRunReportsAFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to stand in for a full disk")
	}
	g := NewWithT(t)
	hub, _ := newHub(t)
	dir := t.TempDir()
	// Every write to the partial file fails with ENOSPC.
	partial := filepath.Join(repoDir(dir), "blobs", blobName(fileNamed(modelFiles(), "config.json"))+".incomplete")
	g.Expect(os.MkdirAll(filepath.Dir(partial), 0o755)).To(Succeed())
	g.Expect(os.Symlink("/dev/full", partial)).To(Succeed())

	_, err := populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))

	g.Expect(err).To(MatchError(populate.ErrDiskFull))
	g.Expect(err).To(MatchError(ContainSubstring("raise cache.size")))
	g.Expect(err).To(MatchError(ContainSubstring("no space left on device")))
}

func TestRunGivesUpOnAFileAfterBoundedRetries(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	hub.FailNext("/"+testModel+"/resolve/", 500, 100)
	dir := t.TempDir()
	s := &sleeper{}
	opts := options(t, hub, dir, s)
	opts.MaxAttempts = 3

	_, err := populate.Run(context.Background(), opts)

	g.Expect(err).To(MatchError(ContainSubstring("downloading config.json: giving up after 3 attempts: HTTP 500")))
	g.Expect(s.recorded()).To(HaveLen(2))
	g.Expect(leftovers(g, dir)).To(BeEmpty())
}

func TestRunLogsProgress(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	dir := t.TempDir()
	opts := options(t, hub, dir, &sleeper{})
	var lines logLines
	opts.Log = lines.logger()

	_, err := populate.Run(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lines.String()).To(ContainSubstring("msg=\"resolved revision\" model=org/embed revision=main commit=" + commit))
	g.Expect(lines.String()).To(ContainSubstring("msg=\"downloaded file\" file=model.safetensors bytes=" + strconv.Itoa(len(weights()))))
}
