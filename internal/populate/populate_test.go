package populate_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

func TestRunWritesTheCacheLayout(t *testing.T) {
	cases := []struct {
		name     string
		revision func(commit string) string
	}{
		{"branch resolves to its commit", func(string) string { return "main" }},
		{"commit is used as is", func(commit string) string { return commit }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			dir := t.TempDir()
			opts := options(t, hub, dir, &sleeper{})
			opts.Revision = tc.revision(commit)

			result, err := populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			files := modelFiles()
			var size int64
			var names []string
			for _, f := range files {
				size += int64(len(f.Data))
				names = append(names, f.Name)
			}
			slices.Sort(names)
			g.Expect(*result).To(Equal(populate.Result{
				ResolvedCommit: commit, ContentDigest: digestOf(files), Files: len(files), Bytes: size,
				Names: names, RepositoryBytes: size,
			}))
			expectCached(g, dir, commit, files)
			g.Expect(os.Readlink(filepath.Join(repoDir(dir), "snapshots", commit, "1_Pooling", "config.json"))).
				To(HavePrefix("../../../blobs/"), "a file in a subfolder links one level further up")
			// TEI's hf-hub reads refs/<revision> for a commit too.
			wantRefs := []string{commit}
			if opts.Revision != commit {
				wantRefs = append(wantRefs, opts.Revision)
			}
			entries, _ := os.ReadDir(filepath.Join(repoDir(dir), "refs"))
			var refs []string
			for _, e := range entries {
				refs = append(refs, e.Name())
				g.Expect(os.ReadFile(filepath.Join(repoDir(dir), "refs", e.Name()))).To(Equal([]byte(commit)))
			}
			g.Expect(refs).To(ConsistOf(wantRefs))
			g.Expect(requestsTo(hub, "/revision/")[0].Query).To(Equal("blobs=true"))
		})
	}
}

func TestRunRecordsTheLatestCommitOfABranch(t *testing.T) {
	g := NewWithT(t)
	hub, first := newHub(t)
	dir := t.TempDir()
	opts := options(t, hub, dir, &sleeper{})
	_, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())

	changed := append(modelFiles(), hubtest.File{Name: "README.md", Data: []byte("# embed\n")})
	second := hub.AddCommit(testModel, "main", changed...)
	result, err := populate.Run(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.ResolvedCommit).To(Equal(second))
	g.Expect(result.ContentDigest).To(Equal(digestOf(changed)))
	g.Expect(os.ReadFile(filepath.Join(repoDir(dir), "refs", "main"))).To(Equal([]byte(second)))
	expectCached(g, dir, first, modelFiles())
	expectCached(g, dir, second, changed)
	g.Expect(requestsTo(hub, "/resolve/")).To(HaveLen(len(modelFiles())+1), "the second commit shares the first's blobs")
}

func TestRunDigestDependsOnContentOnly(t *testing.T) {
	g := NewWithT(t)
	files := modelFiles()
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	changed := modelFiles()
	changed[0].Data = []byte(`{"model_type": "bert", "hidden_size": 16}`)

	digest := func(files []hubtest.File) string {
		hub := hubtest.New(t)
		hub.AddCommit(testModel, "main", files...)
		result, err := populate.Run(context.Background(), options(t, hub, t.TempDir(), &sleeper{}))
		g.Expect(err).NotTo(HaveOccurred())
		return result.ContentDigest
	}

	first := digest(files)
	g.Expect(first).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	g.Expect(digest(files)).To(Equal(first), "stable across runs")
	g.Expect(digest(reversed)).To(Equal(first), "independent of the hub's listing order")
	g.Expect(digest(changed)).NotTo(Equal(first), "changed by a file's content")
}

func TestRunDoesNotDownloadACompleteSnapshotAgain(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	dir := t.TempDir()
	opts := options(t, hub, dir, &sleeper{})
	first, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	downloads := len(requestsTo(hub, "/resolve/"))

	second, err := populate.Run(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).To(Equal(first))
	g.Expect(requestsTo(hub, "/resolve/")).To(HaveLen(downloads), "nothing is downloaded again")
	g.Expect(requestsTo(hub, "/revision/")).To(HaveLen(2), "a branch is resolved on every run")
}

func TestRunUsesTheCacheWhenTheHubIsUnreachable(t *testing.T) {
	cases := []struct {
		name      string
		revision  func(commit string) string
		wantWaits int
	}{
		{"branch resolved from refs after retries", func(string) string { return "main" }, populate.DefaultMaxAttempts - 1},
		{"commit verified without asking the hub", func(commit string) string { return commit }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			dir := t.TempDir()
			online, err := populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))
			g.Expect(err).NotTo(HaveOccurred())
			hub.Close()

			s := &sleeper{}
			opts := options(t, hub, dir, s)
			opts.Revision = tc.revision(commit)
			offline, err := populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(offline).To(Equal(online))
			g.Expect(s.recorded()).To(HaveLen(tc.wantWaits))
		})
	}
}

func TestRunWithoutTheHubRefusesAnIncompleteCache(t *testing.T) {
	weightsFile := fileNamed(modelFiles(), "model.safetensors")
	blob := func(dir string) string { return filepath.Join(repoDir(dir), "blobs", blobName(weightsFile)) }
	cases := []struct {
		name    string
		verify  populate.Verify
		damage  func(g Gomega, dir, commit string)
		message string
	}{
		{"never populated", "", func(g Gomega, dir, _ string) {
			g.Expect(os.RemoveAll(repoDir(dir))).To(Succeed())
		}, `records no commit for revision "main"`},
		{"interrupted before the manifest", "", func(g Gomega, dir, _ string) {
			g.Expect(os.RemoveAll(filepath.Join(repoDir(dir), ".embedops"))).To(Succeed())
		}, "no complete snapshot"},
		{"blob cut short", populate.VerifySizes, func(g Gomega, dir, _ string) {
			g.Expect(os.Truncate(blob(dir), 1000)).To(Succeed())
		}, "model.safetensors has 1000 bytes, the manifest records 600000"},
		{"blob damaged, checked in full", populate.VerifyFull, func(g Gomega, dir, _ string) {
			flipByte(g, blob(dir), 0)
		}, "model.safetensors has sha256"},
		{"link removed", "", func(g Gomega, dir, commit string) {
			g.Expect(os.Remove(filepath.Join(repoDir(dir), "snapshots", commit, "config.json"))).To(Succeed())
		}, "does not link to blob"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			dir := t.TempDir()
			_, err := populate.Run(context.Background(), options(t, hub, dir, &sleeper{}))
			g.Expect(err).NotTo(HaveOccurred())
			hub.Close()
			tc.damage(g, dir, commit)

			opts := options(t, hub, dir, &sleeper{})
			opts.Verify = tc.verify
			_, err = populate.Run(context.Background(), opts)

			g.Expect(err).To(MatchError(ContainSubstring("giving up after 5 attempts")))
			g.Expect(err).To(MatchError(ContainSubstring("the cache cannot stand in")))
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
		})
	}
}

func TestRunRefusesInvalidInput(t *testing.T) {
	cases := []struct {
		name    string
		modify  func(*populate.Options)
		files   []hubtest.File
		message string
	}{
		{"model escaping the cache", func(o *populate.Options) { o.Model = "../etc" }, nil, `model "../etc"`},
		{"model with a double dash", func(o *populate.Options) { o.Model = "org--x/y" }, nil, `model "org--x/y"`},
		{"model with two slashes", func(o *populate.Options) { o.Model = "a/b/c" }, nil, `model "a/b/c"`},
		{"revision escaping refs", func(o *populate.Options) { o.Revision = "../../x" }, nil, `revision "../../x"`},
		{"no directory", func(o *populate.Options) { o.Dir = "" }, nil, "no cache directory"},
		{"endpoint not http", func(o *populate.Options) { o.Endpoint = "file:///tmp" }, nil, "hub endpoint"},
		{"listed file escaping the snapshot", func(*populate.Options) {}, []hubtest.File{{Name: "../../escape", Data: []byte("x")}}, `path "../../escape"`},
		{"listed absolute file", func(*populate.Options) {}, []hubtest.File{{Name: "/etc/passwd", Data: []byte("x")}}, `path "/etc/passwd"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			hub.AddCommit(testModel, "main", append(modelFiles(), tc.files...)...)
			dir := t.TempDir()
			opts := options(t, hub, dir, &sleeper{})
			tc.modify(&opts)

			_, err := populate.Run(context.Background(), opts)

			g.Expect(err).To(MatchError(populate.ErrInvalid))
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			g.Expect(requestsTo(hub, "/resolve/")).To(BeEmpty())
			entries, _ := os.ReadDir(dir)
			g.Expect(entries).To(BeEmpty(), "nothing is written")
		})
	}
}
