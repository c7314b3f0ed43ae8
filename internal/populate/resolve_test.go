package populate_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

func TestResolveAsksTheHubOnlyForTheCommit(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	opts := options(t, hub, "", &sleeper{})

	result, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	var bytes int64
	for _, f := range modelFiles() {
		bytes += int64(len(f.Data))
	}
	g.Expect(*result).To(Equal(populate.Result{ResolvedCommit: commit, Files: 4, Bytes: bytes, RepositoryBytes: bytes,
		Names: []string{"1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json"}}),
		"the commit and what it lists, without an image every file: nothing was cached")
	g.Expect(result.Recordable()).To(BeTrue())
	for _, r := range hub.Requests() {
		g.Expect(r.Path).To(HavePrefix("/api/models/"), "no file is downloaded")
	}
	g.Expect(hub.Requests()).To(HaveLen(1))
}

func TestResolveReturnsACommitWithoutTheHub(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	opts := options(t, hub, "", &sleeper{})
	opts.Revision = commit

	result, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.ResolvedCommit).To(Equal(commit))
	g.Expect(hub.Requests()).To(BeEmpty())
}

func TestResolveRetriesThenFailsWithoutACache(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	hub.FailNext("/api/models/", 503, 100)
	s := &sleeper{}
	opts := options(t, hub, t.TempDir(), s)
	opts.MaxAttempts = 3

	_, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("503"))
	g.Expect(s.recorded()).To(HaveLen(2), "retried as Run retries")
}

func TestResolveReportsAnUnknownRevision(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	opts := options(t, hub, "", &sleeper{})
	opts.Revision = "no-such-branch"

	_, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).To(MatchError(ContainSubstring("no-such-branch")))
}

// With an image, Resolve lists what Run would cache for it, reading the
// files the selection needs from the hub into memory and caching nothing:
// the controller checks the room for the revision with its bytes.
func TestResolveListsWhatRunWouldCacheForTheImage(t *testing.T) {
	g := NewWithT(t)
	hub := hubtest.New(t)
	hub.AddCommit(testModel, "main", denseFiles(hubtest.MultiFormatRepository(1024))...)
	opts := options(t, hub, "", &sleeper{})
	opts.Image = cudaImage

	resolved, err := populate.Resolve(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	opts.Dir = t.TempDir()
	populated, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(resolved.Names).To(Equal(populated.Names))
	g.Expect(resolved.Files).To(Equal(populated.Files))
	g.Expect(resolved.Bytes).To(Equal(populated.Bytes))
	g.Expect(resolved.RepositoryBytes).To(Equal(populated.RepositoryBytes))
	g.Expect(resolved.Bytes).To(BeNumerically("<", resolved.RepositoryBytes), "the ONNX and PyTorch files are not counted")
}
