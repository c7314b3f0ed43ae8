package populate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// weightsBlob is the path of the LFS file's blob in dir.
func weightsBlob(dir string) string {
	return filepath.Join(repoDir(dir), "blobs", blobName(fileNamed(modelFiles(), "model.safetensors")))
}

// manifestPath is the path of commit's manifest in dir.
func manifestPath(dir, commit string) string {
	return filepath.Join(repoDir(dir), ".embedops", commit+".json")
}

func TestRunChecksACompleteSnapshotBySize(t *testing.T) {
	damages := map[string]func(g Gomega, blob string){
		"a byte changed": func(g Gomega, blob string) { flipByte(g, blob, 300_000) },
		"cut short":      func(g Gomega, blob string) { g.Expect(os.Truncate(blob, 300_000)).To(Succeed()) },
	}
	cases := []struct {
		name     string
		verify   populate.Verify
		damage   string
		repaired bool
	}{
		{"by size, a changed byte goes unread", "", "a byte changed", false},
		{"by size, a file cut short is downloaded again", populate.VerifySizes, "cut short", true},
		{"in full, a changed byte is downloaded again", populate.VerifyFull, "a byte changed", true},
		{"in full, a file cut short is downloaded again", populate.VerifyFull, "cut short", true},
	}
	for _, tc := range cases {
		for _, revision := range []string{"branch", "commit"} {
			t.Run(tc.name+", "+revision, func(t *testing.T) {
				g := NewWithT(t)
				hub, commit := newHub(t)
				dir := t.TempDir()
				opts := options(t, hub, dir, &sleeper{})
				if revision == "commit" {
					opts.Revision = commit
				}
				first, err := populate.Run(context.Background(), opts)
				g.Expect(err).NotTo(HaveOccurred())
				damages[tc.damage](g, weightsBlob(dir))
				damaged, err := os.ReadFile(weightsBlob(dir))
				g.Expect(err).NotTo(HaveOccurred())
				requests := len(hub.Requests())

				opts.Verify = tc.verify
				second, err := populate.Run(context.Background(), opts)

				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(second).To(Equal(first), "the result of the run that populated the cache")
				if tc.repaired {
					expectCached(g, dir, commit, modelFiles())
					g.Expect(requestsTo(hub, "/cdn-lfs/")).To(HaveLen(2), "the damaged file is downloaded again")
					return
				}
				g.Expect(os.ReadFile(weightsBlob(dir))).To(Equal(damaged), "the blob was not read, so not replaced")
				wantRequests := map[string]int{"branch": 1, "commit": 0}[revision]
				g.Expect(hub.Requests()[requests:]).To(HaveLen(wantRequests), "a branch is resolved, nothing is downloaded")
			})
		}
	}
}

func TestRunChecksEveryFileWhenTheManifestIsUnusable(t *testing.T) {
	cases := []struct {
		name   string
		damage func(g Gomega, path string)
	}{
		{"not JSON", func(g Gomega, path string) { g.Expect(os.WriteFile(path, []byte("{"), 0o644)).To(Succeed()) }},
		{"another version", func(g Gomega, path string) { editManifest(g, path, "version", 99) }},
		{"a content digest its files do not give", func(g Gomega, path string) {
			editManifest(g, path, "contentDigest", "sha256:"+hubtest.SHA256([]byte("other")))
		}},
		{"a file without its sha256", func(g Gomega, path string) {
			var m map[string]any
			data, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(data, &m)).To(Succeed())
			m["files"].([]any)[0].(map[string]any)["sha256"] = ""
			writeJSON(g, path, m)
		}},
		{"removed", func(g Gomega, path string) { g.Expect(os.Remove(path)).To(Succeed()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			dir := t.TempDir()
			opts := options(t, hub, dir, &sleeper{})
			first, err := populate.Run(context.Background(), opts)
			g.Expect(err).NotTo(HaveOccurred())
			// Damage only a check of every file's content sees.
			flipByte(g, weightsBlob(dir), 300_000)
			tc.damage(g, manifestPath(dir, commit))

			second, err := populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(second).To(Equal(first))
			expectCached(g, dir, commit, modelFiles())
			var m struct {
				ContentDigest string `json:"contentDigest"`
			}
			data, err := os.ReadFile(manifestPath(dir, commit))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(data, &m)).To(Succeed())
			g.Expect(m.ContentDigest).To(Equal(first.ContentDigest), "the manifest is written again")
		})
	}
}

// editManifest sets one field of the manifest at path.
func editManifest(g Gomega, path, field string, value any) {
	var m map[string]any
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &m)).To(Succeed())
	m[field] = value
	writeJSON(g, path, m)
}

func writeJSON(g Gomega, path string, v any) {
	data, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(path, data, 0o644)).To(Succeed())
}

func TestRunRefusesAnUnknownVerification(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	opts := options(t, hub, t.TempDir(), &sleeper{})
	opts.Verify = "quick"

	_, err := populate.Run(context.Background(), opts)

	g.Expect(err).To(MatchError(populate.ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring(`verification "quick": want sizes or full`)))
	g.Expect(hub.Requests()).To(BeEmpty())
}

// BenchmarkRunOnACompleteCache times a start on a complete cache, by commit
// (no hub), for weights of two sizes: checked by size the time does not
// grow with the weights; checked in full it does.
func BenchmarkRunOnACompleteCache(b *testing.B) {
	for _, verify := range []populate.Verify{populate.VerifySizes, populate.VerifyFull} {
		for _, mib := range []int{1, 64} {
			b.Run(fmt.Sprintf("verify=%s/weights=%dMiB", verify, mib), func(b *testing.B) {
				opts := completeCache(b, mib<<20)
				opts.Verify = verify
				for b.Loop() {
					if _, err := populate.Run(context.Background(), opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// completeCache populates a cache with testModel, whose weights have size
// bytes, and returns the options of a run by commit on it.
func completeCache(b *testing.B, size int) populate.Options {
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(data)
	files := append(modelFiles()[:3], hubtest.File{Name: "model.safetensors", Data: data, LFS: true})
	hub := hubtest.New(b)
	commit := hub.AddCommit(testModel, "main", files...)
	opts := populate.Options{Model: testModel, Revision: commit, Dir: b.TempDir(), Endpoint: hub.URL}
	if _, err := populate.Run(context.Background(), opts); err != nil {
		b.Fatalf("populating the cache: %v", err)
	}
	hub.Close()
	return opts
}

func TestRunFromACompleteCacheRestoresItsRefs(t *testing.T) {
	cases := []struct {
		name    string
		branch  bool
		offline bool
		removed func(commit string) []string
	}{
		{"branch", true, false, func(commit string) []string { return []string{"main", commit} }},
		{"commit", false, false, func(commit string) []string { return []string{commit} }},
		{"branch, without the hub", true, true, func(commit string) []string { return []string{commit} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			dir := t.TempDir()
			opts := options(t, hub, dir, &sleeper{})
			if !tc.branch {
				opts.Revision = commit
			}
			_, err := populate.Run(context.Background(), opts)
			g.Expect(err).NotTo(HaveOccurred())
			for _, ref := range tc.removed(commit) {
				g.Expect(os.Remove(filepath.Join(repoDir(dir), "refs", ref))).To(Succeed())
			}
			if tc.offline {
				hub.Close()
			}
			downloads := len(requestsTo(hub, "/resolve/"))

			_, err = populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(requestsTo(hub, "/resolve/")).To(HaveLen(downloads), "checked by size, not downloaded")
			for _, revision := range []string{opts.Revision, commit} {
				_, ok := hfHubGet(dir, revision, "config.json")
				g.Expect(ok).To(BeTrue(), "TEI started on --revision=%s finds the snapshot", revision)
			}
		})
	}
}
