package populate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Verify says how a run checks the files of a snapshot that the cache
// already holds and that its manifest marks complete.
type Verify string

const (
	// VerifySizes checks that each file of the manifest links to its blob
	// and that the blob has the recorded size, and reads no file's content:
	// a start takes the same time whatever the size of the model. A blob is
	// renamed into place only once its content verified, so what this
	// misses is damage done to the volume later that keeps a file's size.
	VerifySizes Verify = "sizes"
	// VerifyFull hashes every file again, as a first download does, and
	// downloads again any file that does not match.
	VerifyFull Verify = "full"
)

// ParseVerify returns the Verify named s.
func ParseVerify(s string) (Verify, error) {
	v := Verify(s)
	if v != VerifySizes && v != VerifyFull {
		return "", fmt.Errorf("%w verification %q: want %s or %s", ErrInvalid, s, VerifySizes, VerifyFull)
	}
	return v, nil
}

// cached returns what a commit's snapshot in the cache holds when it passes
// the check p.verify names, and records the refs TEI finds it by. When it
// does not, cached logs why and that the run goes on with next, unless the
// cache simply holds no snapshot of the commit.
func (p *populator) cached(ctx context.Context, commit, next string) (*Result, bool) {
	result, err := p.fromCache(ctx, commit)
	if err == nil {
		err = p.writeRefs(commit)
	}
	if err != nil {
		if !errors.Is(err, errNoSnapshot) {
			p.log.Warn("the cached snapshot is unusable; "+next, "commit", commit, "verify", string(p.verify), "error", err.Error())
		}
		return nil, false
	}
	p.log.Info("snapshot checked in the cache", "model", p.model, "revision", p.revision, "commit", commit,
		"verify", string(p.verify), "files", result.Files, "bytes", result.Bytes)
	return result, true
}

// fromCache checks a commit's snapshot against its manifest, as p.verify
// says, and returns what it holds: the manifest's result, unchanged.
func (p *populator) fromCache(ctx context.Context, commit string) (*Result, error) {
	m, err := p.completeManifest(commit)
	if err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		if err := p.checkFile(ctx, commit, f); err != nil {
			return nil, err
		}
	}
	return resultOf(*m), nil
}

// completeManifest returns the manifest that marks a commit's snapshot
// complete with the files this run caches, after checking that its content
// digest is the one its records give.
func (p *populator) completeManifest(commit string) (*manifest, error) {
	m, ok, err := p.cache.readManifest(commit)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("commit %s: %w", commit, errNoSnapshot)
	}
	// A manifest without a selection is of a run that cached every file.
	if m.Selection != "" && m.Selection != p.selection {
		return nil, fmt.Errorf("commit %s holds the files of %s, not of %s: %w", commit, m.Selection, p.selection, errNoSnapshot)
	}
	if digest := digestOf(m.Files); digest != m.ContentDigest {
		return nil, fmt.Errorf("%w: %s records content digest %s, its files give %s", ErrCorrupt, p.cache.manifestPath(commit), m.ContentDigest, digest)
	}
	return m, nil
}

// checkFile checks one file of a manifest: its link to its blob, and the
// blob by size (VerifySizes) or by content (VerifyFull).
func (p *populator) checkFile(ctx context.Context, commit string, f fileRecord) error {
	link := p.cache.snapshotPath(commit, f.Name)
	if target, err := os.Readlink(link); err != nil || target != linkTarget(f.Name, f.Blob) {
		return fmt.Errorf("%w: %s does not link to blob %s", ErrCorrupt, link, f.Blob)
	}
	blob := p.cache.blobPath(f.Blob)
	if p.verify == VerifyFull {
		_, err := p.verifyBlob(ctx, f.Name, blob, expectation{size: f.Size, sha256: f.SHA256})
		return err
	}
	info, err := os.Stat(blob)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, f.Name, err)
	}
	if !info.Mode().IsRegular() || info.Size() != f.Size {
		return fmt.Errorf("%w: %s has %d bytes, the manifest records %d", ErrCorrupt, f.Name, info.Size(), f.Size)
	}
	return nil
}

// resultOf is what a complete snapshot holds.
func resultOf(m manifest) *Result {
	result := &Result{ResolvedCommit: m.Commit, ContentDigest: digestOf(m.Files), Files: len(m.Files), RepositoryBytes: m.RepositoryBytes}
	for _, r := range m.Files {
		result.Bytes += r.Size
		result.Names = append(result.Names, r.Name)
	}
	slices.Sort(result.Names)
	return result
}
