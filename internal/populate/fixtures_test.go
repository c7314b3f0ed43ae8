package populate_test

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// testModel is the stand-in model every test downloads.
const testModel = "org/embed"

// repoDir is testModel's folder in a cache directory.
func repoDir(dir string) string { return filepath.Join(dir, "models--org--embed") }

// weights is the LFS file's content: larger than one read buffer, and random
// so a flipped byte is a different file.
func weights() []byte {
	data := make([]byte, 600_000)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(data)
	return data
}

// modelFiles are a small model: regular files, one in a subfolder, and one LFS file.
func modelFiles() []hubtest.File {
	return []hubtest.File{
		{Name: "config.json", Data: []byte(`{"model_type": "bert", "hidden_size": 8}`)},
		{Name: "tokenizer.json", Data: []byte(`{"version": "1.0", "model": {"type": "WordPiece"}}`)},
		{Name: "1_Pooling/config.json", Data: []byte(`{"pooling_mode_cls_token": true}`)},
		{Name: "model.safetensors", Data: weights(), LFS: true},
	}
}

// blobName is the name a file's blob has in the cache.
func blobName(f hubtest.File) string {
	if f.LFS {
		return hubtest.SHA256(f.Data)
	}
	return hubtest.BlobID(f.Data)
}

// fileNamed returns the file of files with the name.
func fileNamed(files []hubtest.File, name string) hubtest.File {
	for _, f := range files {
		if f.Name == name {
			return f
		}
	}
	panic("no file " + name)
}

// sleeper records the waits asked of it and returns at once.
type sleeper struct {
	mu      sync.Mutex
	waits   []time.Duration
	onSleep func()
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	onSleep := s.onSleep
	s.mu.Unlock()
	if onSleep != nil {
		onSleep()
	}
	return ctx.Err()
}

func (s *sleeper) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newHub starts a stand-in hub holding testModel's files on main.
func newHub(t *testing.T) (*hubtest.Hub, string) {
	hub := hubtest.New(t)
	return hub, hub.AddCommit(testModel, "main", modelFiles()...)
}

// options downloads testModel at main from hub into dir, sleeping with s and
// logging to the test's output. Files are downloaded one at a time, so a
// failure the hub injects hits the file a test expects; the parallel
// tests set Parallel.
func options(t *testing.T, hub *hubtest.Hub, dir string, s *sleeper) populate.Options {
	return populate.Options{
		Model:    testModel,
		Revision: "main",
		Dir:      dir,
		Endpoint: hub.URL,
		Parallel: 1,
		Sleep:    s.sleep,
		Log:      slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

// requestsTo returns the hub's requests whose path contains part.
func requestsTo(hub *hubtest.Hub, part string) []hubtest.Request {
	var matched []hubtest.Request
	for _, r := range hub.Requests() {
		if strings.Contains(r.Path, part) {
			matched = append(matched, r)
		}
	}
	return matched
}

// leftovers lists the temporary files under dir.
func leftovers(g Gomega, dir string) []string {
	var found []string
	g.Expect(filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if strings.HasSuffix(path, ".incomplete") || strings.HasSuffix(path, ".embedops-tmp") {
			found = append(found, path)
		}
		return err
	})).To(Succeed())
	return found
}

// expectCached checks that the snapshot of commit in dir holds files.
func expectCached(g Gomega, dir, commit string, files []hubtest.File) {
	for _, f := range files {
		blob := filepath.Join(repoDir(dir), "blobs", blobName(f))
		g.Expect(os.ReadFile(blob)).To(Equal(f.Data), f.Name)
		link := filepath.Join(repoDir(dir), "snapshots", commit, filepath.FromSlash(f.Name))
		target := strings.Repeat("../", 2+strings.Count(f.Name, "/")) + "blobs/" + blobName(f)
		g.Expect(os.Readlink(link)).To(Equal(target), f.Name)
		g.Expect(os.ReadFile(link)).To(Equal(f.Data), f.Name)
	}
	g.Expect(leftovers(g, dir)).To(BeEmpty())
}

// digestOf computes the content digest of files independently of the cache.
func digestOf(files []hubtest.File) string {
	digests := make([]populate.FileDigest, 0, len(files))
	for _, f := range files {
		digests = append(digests, populate.FileDigest{Name: f.Name, SHA256: hubtest.SHA256(f.Data)})
	}
	return populate.ContentDigest(digests)
}

// flipByte changes one byte of a file in place.
func flipByte(g Gomega, path string, at int) {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	data = bytes.Clone(data)
	data[at] ^= 0xff
	g.Expect(os.WriteFile(path, data, 0o644)).To(Succeed())
}

// logLines collects what a run logs.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logLines) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
