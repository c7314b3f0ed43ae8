package populate_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

func TestRunVerifiesAMirrorsFilesByTheirHeaders(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	hub.ListNamesOnly()
	dir := t.TempDir()

	result, err := populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.ResolvedCommit).To(Equal(commit))
	g.Expect(result.ContentDigest).To(Equal(digestOf(modelFiles())))
	g.Expect(result.RepositoryBytes).To(BeZero(), "a names-only listing gives no repository size")
	expectCached(g, dir, commit, modelFiles())
	heads := 0
	for _, r := range requestsTo(hub, "/resolve/") {
		if r.Method == http.MethodHead {
			heads++
		}
	}
	g.Expect(heads).To(Equal(len(modelFiles())), "one HEAD per file, as huggingface_hub's get_hf_file_metadata")
}

func TestRunRefusesAMirrorsCorruptedDownload(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	hub.ListNamesOnly()
	hub.Corrupt("model.safetensors")
	dir := t.TempDir()

	_, err := populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))

	g.Expect(err).To(MatchError(populate.ErrCorrupt))
	g.Expect(err).To(MatchError(ContainSubstring("model.safetensors has sha256")))
	g.Expect(leftovers(g, dir)).To(BeEmpty())
}

func TestRunRefusesAFileNothingCanVerify(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	hub.ListNamesOnly()
	hub.StripETags()
	dir := t.TempDir()

	_, err := populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))

	g.Expect(err).To(MatchError(populate.ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring("neither an X-Linked-Etag sha256 nor a git blob id ETag")))
	g.Expect(requestsTo(hub, "/cdn-lfs/")).To(BeEmpty(), "nothing unverifiable is downloaded")
}

func TestRunRefusesABadListing(t *testing.T) {
	cases := []struct {
		name     string
		siblings []map[string]any
		message  string
	}{
		{"duplicate names", []map[string]any{{"rfilename": "config.json"}, {"rfilename": "tokenizer.json"}, {"rfilename": "config.json"}}, `file "config.json" is listed twice`},
		{"path escaping the snapshot", []map[string]any{{"rfilename": "config.json"}, {"rfilename": "../../../outside"}}, `path "../../../outside"`},
		{"absolute path", []map[string]any{{"rfilename": "/tmp/outside"}}, `path "/tmp/outside"`},
		{"blob id that is no blob id", []map[string]any{{"rfilename": "config.json", "blobId": "../x", "size": 3}}, `blob "../x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			hub.SetListing(testModel, commit, tc.siblings)
			parent := t.TempDir()
			dir := filepath.Join(parent, "cache")

			_, err := populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))

			g.Expect(err).To(MatchError(populate.ErrInvalid))
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			entries, _ := os.ReadDir(parent)
			g.Expect(entries).To(BeEmpty(), "nothing is written, in the cache or beside it")
		})
	}
}

func TestRunRefusesAnOversizedRetryAfter(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	hub.FailNext("/api/", http.StatusTooManyRequests, 1)
	hub.RetryAfter("86400")
	s := &sleeper{}

	_, err := populate.Run(context.Background(), options(t, hub, t.TempDir(), s))

	g.Expect(err).To(MatchError(ContainSubstring("HTTP 429")))
	g.Expect(err).To(MatchError(ContainSubstring("retry after 86400s, longer than the 5m0s populate waits")))
	g.Expect(s.recorded()).To(BeEmpty(), "no day-long wait")
}

func TestRunRetriesAMetadataRequestThatTimesOut(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	hub.ListNamesOnly()
	hub.StallNext("/"+testModel+"/resolve/", 1)
	dir := t.TempDir()
	s := &sleeper{}
	opts := options(t, hub, dir, s)
	opts.MetadataTimeout = time.Second
	var lines logLines
	opts.Log = lines.logger()
	// Should the timeout not apply, the stalled request ends with this context.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	result, err := populate.Run(ctx, opts)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.ContentDigest).To(Equal(digestOf(modelFiles())))
	expectCached(g, dir, commit, modelFiles())
	g.Expect(s.recorded()).NotTo(BeEmpty(), "the stalled HEAD was retried")
	g.Expect(lines.String()).To(ContainSubstring("no answer within 1s"))
}
