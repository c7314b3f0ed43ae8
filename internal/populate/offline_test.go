package populate_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

const userCommit = "0123456789abcdef0123456789abcdef01234567"

// userCache lays testModel out in dir as huggingface_hub's CLI does (the hub
// cache layout): blobs, snapshots/<commit>/<file> linking to them, and
// refs/main holding the commit, with no embedops manifest.
func userCache(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	g := NewWithT(t)
	root := repoDir(dir)
	for name, content := range files {
		blob := filepath.Join(root, "blobs", strings.ReplaceAll(name, "/", "_"))
		g.Expect(os.MkdirAll(filepath.Dir(blob), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(blob, []byte(content), 0o644)).To(Succeed())
		link := filepath.Join(root, "snapshots", userCommit, filepath.FromSlash(name))
		g.Expect(os.MkdirAll(filepath.Dir(link), 0o755)).To(Succeed())
		target, err := filepath.Rel(filepath.Dir(link), blob)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.Symlink(target, link)).To(Succeed())
	}
	writeRef(t, dir, "main", userCommit)
}

func writeRef(t *testing.T, dir, revision, content string) {
	t.Helper()
	path := filepath.Join(repoDir(dir), "refs", filepath.FromSlash(revision))
	NewWithT(t).Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(path, []byte(content), 0o644)).To(Succeed())
}

var userFiles = map[string]string{
	"config.json":           `{"model_type": "bert"}`,
	"tokenizer.json":        `{}`,
	"model.safetensors":     "weights",
	"1_Pooling/config.json": `{"pooling_mode_cls_token": true}`,
}

func TestVerifyOfflineFindsTheModelAsTEIDoes(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	userCache(t, dir, userFiles)

	result, err := populate.VerifyOffline(t.Context(), populate.Options{Model: testModel, Revision: "main", Dir: dir,
		Endpoint: "http://127.0.0.1:1", Image: "ghcr.io/huggingface/text-embeddings-inference:cpu-1.9"})

	g.Expect(err).NotTo(HaveOccurred(), "no hub is asked: the endpoint refuses every connection")
	g.Expect(result.ResolvedCommit).To(Equal(userCommit))
	g.Expect(result.Names).To(Equal([]string{"1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json"}))
	g.Expect(result.Files).To(Equal(4))
	g.Expect(result.Bytes).To(Equal(int64(len(`{"model_type": "bert"}`) + 2 + len("weights") + len(`{"pooling_mode_cls_token": true}`))))
	g.Expect(result.Recordable()).To(BeTrue(), "a binding records it")
}

func TestVerifyOfflineSaysWhatTheCacheLacks(t *testing.T) {
	cases := []struct {
		name     string
		revision string
		prepare  func(t *testing.T, dir string)
		message  string
	}{
		{"no model", "main", func(*testing.T, string) {}, "no models--org--embed/refs/main"},
		{"no ref of the revision", "v2", func(t *testing.T, dir string) { userCache(t, dir, userFiles) }, "no models--org--embed/refs/v2"},
		{"a commit revision without its ref", userCommit, func(t *testing.T, dir string) { userCache(t, dir, userFiles) },
			"no models--org--embed/refs/" + userCommit},
		{"a ref with a newline", "main", func(t *testing.T, dir string) {
			userCache(t, dir, userFiles)
			writeRef(t, dir, "main", userCommit+"\n")
		}, "not a bare commit id (TEI's hf-hub reads it as it is)"},
		{"a ref to a missing snapshot", "main", func(t *testing.T, dir string) {
			userCache(t, dir, userFiles)
			writeRef(t, dir, "main", strings.Repeat("a", 40))
		}, "no models--org--embed/snapshots/" + strings.Repeat("a", 40)},
		{"a link to a missing blob", "main", func(t *testing.T, dir string) {
			userCache(t, dir, userFiles)
			NewWithT(t).Expect(os.Remove(filepath.Join(repoDir(dir), "blobs", "model.safetensors"))).To(Succeed())
		}, "model.safetensors links to no readable blob"},
		{"no tokenizer", "main", func(t *testing.T, dir string) {
			userCache(t, dir, map[string]string{"config.json": "{}", "model.safetensors": "w"})
		}, "no tokenizer.json, which TEI requires"},
		{"no weights", "main", func(t *testing.T, dir string) {
			userCache(t, dir, map[string]string{"config.json": "{}", "tokenizer.json": "{}"})
		}, "no ONNX, safetensors or pytorch_model.bin weights"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			tc.prepare(t, dir)
			_, err := populate.VerifyOffline(t.Context(), populate.Options{Model: testModel, Revision: tc.revision, Dir: dir})
			g.Expect(err).To(HaveOccurred())
			g.Expect(errors.Is(err, populate.ErrNotInCache)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestVerifyOfflineAcceptsACommitRevisionWithItsRef(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	userCache(t, dir, userFiles)
	writeRef(t, dir, userCommit, userCommit)
	result, err := populate.VerifyOffline(t.Context(), populate.Options{Model: testModel, Revision: userCommit, Dir: dir})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.ResolvedCommit).To(Equal(userCommit))
}

func TestVerifyOfflineWritesNothing(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	userCache(t, dir, userFiles)
	before := tree(t, dir)
	_, err := populate.VerifyOffline(t.Context(), populate.Options{Model: testModel, Dir: dir})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tree(t, dir)).To(Equal(before), "the claim is the user's, mounted read-only")
}

// tree lists every path under dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	NewWithT(t).Expect(filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		paths = append(paths, path)
		return err
	})).To(Succeed())
	return paths
}
