package populate

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The populator trusts neither the hub nor the cache volume: file names
// from the hub, its error bodies and Retry-After headers, and manifests
// left on the volume are all checked before use. These fuzz tests check
// that a name passing the checks never leads outside the cache.

const (
	fuzzCommit = "0123456789abcdef0123456789abcdef01234567"
	fuzzBlob   = "89abcdef0123456789abcdef0123456789abcdef"
)

// FuzzValidPath checks that a file name validPath accepts stays inside its
// snapshot, and that its symlink resolves to the blob it names.
func FuzzValidPath(f *testing.F) {
	for _, seed := range []string{"config.json", "onnx/model.onnx", "../../etc/passwd", "a/../b", "/abs", "a//b", "a\\b", ".", "...", "a/./b", "x\x00y"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if validPath(name) != nil {
			return
		}
		c := newCacheRepo("/cache", "org/model")
		snapshot := filepath.Join(c.root(), "snapshots", fuzzCommit)
		path := c.snapshotPath(fuzzCommit, name)
		if !inside(snapshot, path) {
			t.Fatalf("file %q is written to %s, outside %s", name, path, snapshot)
		}
		if got := filepath.Join(filepath.Dir(path), linkTarget(name, fuzzBlob)); got != c.blobPath(fuzzBlob) {
			t.Fatalf("file %q links to %s, not its blob %s", name, got, c.blobPath(fuzzBlob))
		}
	})
}

// FuzzValidRevision checks that a revision validRevision accepts names a
// ref file inside refs/.
func FuzzValidRevision(f *testing.F) {
	for _, seed := range []string{"main", "refs/pr/1", "v1.0", "../main", "refs/../../x", fuzzCommit} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, revision string) {
		if validRevision(revision) != nil {
			return
		}
		c := newCacheRepo("/cache", "org/model")
		if refs := filepath.Join(c.root(), "refs"); !inside(refs, c.refPath(revision)) {
			t.Fatalf("revision %q is written to %s, outside %s", revision, c.refPath(revision), refs)
		}
	})
}

// FuzzValidModel checks that a model validModel accepts names one folder
// directly inside the cache directory.
func FuzzValidModel(f *testing.F) {
	for _, seed := range []string{"BAAI/bge-small-en-v1.5", "gpt2", "a/b/c", "../x", "a--b/c", "a/.hidden", ".", "org/.."} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, model string) {
		if validModel(model) != nil {
			return
		}
		c := newCacheRepo("/cache", model)
		if filepath.Dir(c.root()) != "/cache" || strings.ContainsAny(c.folder, "/\\") || c.folder == "." || c.folder == ".." {
			t.Fatalf("model %q is cached in %s, not a folder of its own in /cache", model, c.root())
		}
	})
}

// FuzzHubMessage checks that whatever the hub answers, the message shown is
// short, one line and not HTML. (It may end in a rune cut in half: the
// excerpt is cut at a byte count.)
func FuzzHubMessage(f *testing.F) {
	for _, seed := range []string{`{"error":"Repository not found"}`, "<html>", "a\nb", "\xff", strings.Repeat("x", 300), `{"error":"` + strings.Repeat("é", 150) + `"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := hubMessage(body)
		whole := withoutCutRune(strings.TrimSuffix(msg, "..."))
		if len(msg) > 203 || strings.ContainsAny(msg, "<\n") || !utf8.ValidString(whole) {
			t.Fatalf("%q gives the message %q", body, msg)
		}
	})
}

// withoutCutRune is s without the bytes of a rune cut in half at its end.
func withoutCutRune(s string) string {
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// FuzzParseRetryAfter checks that no Retry-After header makes the
// populator wait longer than maxRetryAfter, and that a wait within it is
// honoured to the second.
func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"1", " 30 ", "300", "301", "0", "-5", "9223372036854775807", "Wed, 21 Oct 2015 07:28:00 GMT", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		wait := parseRetryAfter(value)
		if wait > maxRetryAfter {
			t.Fatalf("Retry-After %q waits %s, more than %s", value, wait, maxRetryAfter)
		}
		seconds, err := strconv.Atoi(strings.TrimSpace(value))
		if err == nil && seconds > 0 && time.Duration(seconds) <= maxRetryAfter/time.Second && wait != time.Duration(seconds)*time.Second {
			t.Fatalf("Retry-After %q waits %s", value, wait)
		}
	})
}

// FuzzReadManifest checks that a manifest found on the volume is either
// refused as corrupt or lists only files that stay inside the snapshot.
func FuzzReadManifest(f *testing.F) {
	for _, seed := range []string{
		`{"version":1,"model":"org/model","commit":"` + fuzzCommit + `","files":[{"name":"config.json","blob":"` + fuzzBlob + `"}]}`,
		`{"version":1,"commit":"` + fuzzCommit + `","files":[{"name":"../../x","blob":"` + fuzzBlob + `"}]}`,
		`{"version":2}`, `[]`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := newCacheRepo(t.TempDir(), "org/model")
		if err := os.MkdirAll(filepath.Dir(c.manifestPath(fuzzCommit)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(c.manifestPath(fuzzCommit), data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, ok, err := c.readManifest(fuzzCommit)
		if err != nil || !ok {
			return
		}
		snapshot := filepath.Join(c.root(), "snapshots", fuzzCommit)
		for _, file := range m.Files {
			if !inside(snapshot, c.snapshotPath(fuzzCommit, file.Name)) || !blobPattern.MatchString(file.Blob) {
				t.Fatalf("manifest %q lists %+v", data, file)
			}
		}
	})
}

// inside reports whether path is strictly inside dir.
func inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
