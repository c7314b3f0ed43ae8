package populate

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// manifestVersion is the version of the manifest file's format.
const manifestVersion = 1

var (
	// modelIDPattern is the shape of a hub repository id: "name" or "org/name".
	modelIDPattern = regexp.MustCompile(`^(?:[A-Za-z0-9_.-]+/)?[A-Za-z0-9_.-]+$`)
	// commitPattern is a full git commit id, as the hub returns it.
	commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)
	// blobPattern is a blob name: a git blob id or an LFS sha256.
	blobPattern = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
	// sha256Pattern is an LFS file's sha256.
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// gitBlobPattern is a git blob id.
	gitBlobPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// cacheRepo is one model's directory in the cache.
type cacheRepo struct {
	dir    string // the cache directory
	folder string // "models--org--name"
}

// fileRecord is one verified file of a snapshot, as the manifest records it.
type fileRecord struct {
	Name   string `json:"name"`
	Blob   string `json:"blob"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// manifest marks a snapshot complete and records what it holds.
type manifest struct {
	Version   int    `json:"version"`
	Model     string `json:"model"`
	Commit    string `json:"commit"`
	Selection string `json:"selection,omitempty"`
	// RepositoryBytes is the size of every file of the commit, 0 if unknown.
	RepositoryBytes int64        `json:"repositoryBytes,omitempty"`
	ContentDigest   string       `json:"contentDigest"`
	Files           []fileRecord `json:"files"`
}

// validModel checks a hub model id, which names a cache folder.
func validModel(model string) error {
	if len(model) > 96 || !modelIDPattern.MatchString(model) || strings.Contains(model, "--") || strings.Contains(model, "..") ||
		strings.HasPrefix(model, ".") || strings.Contains(model, "/.") {
		return fmt.Errorf("%w model %q: want a hub repository id such as \"org/name\"", ErrInvalid, model)
	}
	return nil
}

// validRevision checks a revision, which may name a file under refs/ ("refs/pr/1" is a revision).
func validRevision(revision string) error {
	if revision == "" || len(revision) > 255 || validPath(revision) != nil {
		return fmt.Errorf("%w revision %q", ErrInvalid, revision)
	}
	return nil
}

// validPath checks a relative, "/"-separated path that must stay inside its directory.
func validPath(name string) error {
	if name == "" || strings.ContainsAny(name, "\\\x00") {
		return fmt.Errorf("%w path %q", ErrInvalid, name)
	}
	for segment := range strings.SplitSeq(name, "/") {
		if segment == "" || segment == "." || segment == ".." {
			return fmt.Errorf("%w path %q", ErrInvalid, name)
		}
	}
	return nil
}

// isCommit reports whether a revision is a full commit id.
func isCommit(revision string) bool { return commitPattern.MatchString(revision) }

func newCacheRepo(dir, model string) cacheRepo {
	return cacheRepo{dir: dir, folder: "models--" + strings.ReplaceAll(model, "/", "--")}
}

func (c cacheRepo) root() string                { return filepath.Join(c.dir, c.folder) }
func (c cacheRepo) blobPath(blob string) string { return filepath.Join(c.root(), "blobs", blob) }
func (c cacheRepo) refPath(revision string) string {
	return filepath.Join(c.root(), "refs", filepath.FromSlash(revision))
}
func (c cacheRepo) snapshotPath(commit, name string) string {
	return filepath.Join(c.root(), "snapshots", commit, filepath.FromSlash(name))
}
func (c cacheRepo) manifestPath(commit string) string {
	return filepath.Join(c.root(), ".embedops", commit+".json")
}
func (c cacheRepo) lockPath(blob string) string {
	return filepath.Join(c.dir, ".locks", c.folder, blob+".lock")
}

// linkTarget is the relative symlink from snapshots/<commit>/<name> to its blob.
func linkTarget(name, blob string) string {
	return strings.Repeat("../", 2+strings.Count(name, "/")) + "blobs/" + blob
}

// link points snapshots/<commit>/<name> at its blob, replacing whatever is
// there atomically.
func (c cacheRepo) link(commit string, f fileRecord) error {
	path := c.snapshotPath(commit, f.Name)
	target := linkTarget(f.Name, f.Blob)
	if current, err := os.Readlink(path); err == nil && current == target {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return diskError("creating", filepath.Dir(path), err)
	}
	tmp := tempName(path)
	if err := os.Symlink(target, tmp); err != nil {
		return diskError("linking", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return diskError("linking", path, err)
	}
	return nil
}

// tempName is a name beside path that no other populator uses, so
// populators sharing a volume never rename each other's temporary files.
func tempName(path string) string {
	return path + "." + rand.Text()[:12] + ".embedops-tmp"
}

// writeFile writes data to path through a temporary file and a rename, so a
// reader sees the old content or the new, never a part.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return diskError("creating", filepath.Dir(path), err)
	}
	tmp := tempName(path)
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		_ = os.Remove(tmp)
		return diskError("writing", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return diskError("writing", path, err)
	}
	return nil
}

// writeRef records the commit a revision resolved to.
func (c cacheRepo) writeRef(revision, commit string) error {
	if current, err := os.ReadFile(c.refPath(revision)); err == nil && strings.TrimSpace(string(current)) == commit {
		return nil
	}
	return writeFile(c.refPath(revision), []byte(commit))
}

// readRef returns the commit recorded for a revision, or "" if none is.
func (c cacheRepo) readRef(revision string) (string, error) {
	data, err := os.ReadFile(c.refPath(revision))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", c.refPath(revision), err)
	}
	commit := strings.TrimSpace(string(data))
	if !isCommit(commit) {
		return "", fmt.Errorf("%w: %s holds %q, not a commit id", ErrCorrupt, c.refPath(revision), commit)
	}
	return commit, nil
}

// writeManifest records a complete snapshot; it is written last.
func (c cacheRepo) writeManifest(m manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the manifest: %w", err)
	}
	return writeFile(c.manifestPath(m.Commit), append(data, '\n'))
}

// readManifest returns the manifest of a commit's snapshot, and whether there is one.
func (c cacheRepo) readManifest(commit string) (*manifest, bool, error) {
	data, err := os.ReadFile(c.manifestPath(commit))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", c.manifestPath(commit), err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil || m.Version != manifestVersion || m.Commit != commit {
		return nil, false, fmt.Errorf("%w: %s is not a version %d manifest of commit %s", ErrCorrupt, c.manifestPath(commit), manifestVersion, commit)
	}
	for _, f := range m.Files {
		if validPath(f.Name) != nil || !blobPattern.MatchString(f.Blob) {
			return nil, false, fmt.Errorf("%w: %s lists file %q with blob %q", ErrCorrupt, c.manifestPath(commit), f.Name, f.Blob)
		}
	}
	return &m, true, nil
}
