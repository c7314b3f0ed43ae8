package populate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// copyBuffer is the size of the reads from the hub and from disk.
	copyBuffer = 256 << 10
	// progressMinSize is the smallest file whose download logs its progress.
	progressMinSize = 64 << 20
)

// errStalled ends a download that received nothing for the idle timeout.
var errStalled = errors.New("the download stalled")

// remoteFile is one file of the hub's listing, checked.
type remoteFile struct {
	name string
	blob string
	want expectation
}

// planFiles checks the hub's listing: names that stay inside the snapshot,
// each listed once, and the blob names and sizes of files listed with blob
// metadata. A file listed without it (hub mirrors list names only) has no
// blob yet: its download headers give it (see hub.metadata).
func planFiles(siblings []sibling) ([]remoteFile, error) {
	files := make([]remoteFile, 0, len(siblings))
	seen := make(map[string]bool, len(siblings))
	for _, s := range siblings {
		if err := validPath(s.RFilename); err != nil {
			return nil, fmt.Errorf("listing: %w", err)
		}
		if seen[s.RFilename] {
			return nil, fmt.Errorf("%w listing: file %q is listed twice", ErrInvalid, s.RFilename)
		}
		seen[s.RFilename] = true
		f := remoteFile{name: s.RFilename}
		switch {
		case s.LFS != nil:
			f.blob = strings.ToLower(s.LFS.SHA256)
			f.want = expectation{size: s.LFS.Size, sha256: f.blob}
		case s.BlobID != "" && s.Size != nil:
			f.blob = strings.ToLower(s.BlobID)
			f.want = expectation{size: *s.Size, gitBlob: f.blob}
		default:
			files = append(files, f)
			continue
		}
		if !blobPattern.MatchString(f.blob) || f.want.size < 0 {
			return nil, fmt.Errorf("%w listing: file %q has blob %q of size %d", ErrInvalid, s.RFilename, f.blob, f.want.size)
		}
		files = append(files, f)
	}
	return files, nil
}

// listedSize is the total size of the listed files, or 0 when a file was
// listed without its size.
func listedSize(files []remoteFile) int64 {
	var total int64
	for _, f := range files {
		if f.blob == "" {
			return 0
		}
		total += f.want.size
	}
	return total
}

// ensureBlob makes blobs/<blob> hold the file, verified, and returns its record.
func (p *populator) ensureBlob(ctx context.Context, commit string, f remoteFile) (fileRecord, error) {
	release, err := p.lockBlob(ctx, f.blob, f.name)
	if err != nil {
		return fileRecord{}, err
	}
	defer release()
	final := p.cache.blobPath(f.blob)
	sum, err := p.verifyBlob(ctx, f.name, final, f.want)
	switch {
	case err == nil:
		p.log.Info("verified file", "file", f.name, "bytes", f.want.size)
	case errors.Is(err, fs.ErrNotExist):
		sum, err = p.fetch(ctx, commit, f)
	case errors.Is(err, ErrCorrupt):
		p.log.Warn("the cached file is damaged; downloading it again", "file", f.name, "error", err.Error())
		if err := os.Remove(final); err != nil {
			return fileRecord{}, fmt.Errorf("removing %s: %w", final, err)
		}
		sum, err = p.fetch(ctx, commit, f)
	}
	if err != nil {
		return fileRecord{}, err
	}
	return fileRecord{Name: f.name, Blob: f.blob, Size: f.want.size, SHA256: sum}, nil
}

// verifyBlob hashes a blob on disk and checks it; a missing blob is fs.ErrNotExist.
func (p *populator) verifyBlob(ctx context.Context, name, path string, want expectation) (string, error) {
	in, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", path, err)
	}
	defer in.Close()
	d := newDigester(want)
	if _, err := io.CopyBuffer(d, contextReader{ctx: ctx, r: in}, make([]byte, copyBuffer)); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return d.check(name)
}

// fetch downloads a file into blobs/<blob>.incomplete, resuming what an
// earlier attempt left there, and renames it into place once it verifies.
func (p *populator) fetch(ctx context.Context, commit string, f remoteFile) (string, error) {
	target := p.hub.fileURL(p.model, commit, f.name)
	var sum string
	err := p.hub.retry.run(ctx, "downloading "+f.name, func(ctx context.Context) (bool, error) {
		var progressed bool
		var err error
		sum, progressed, err = p.fetchOnce(ctx, target, f)
		return progressed, err
	})
	if err != nil {
		return "", p.hub.explain(ctx, err, subject{model: p.model, revision: commit, file: f.name})
	}
	return sum, nil
}

// fetchOnce is one attempt of fetch. It reports whether it received bytes.
func (p *populator) fetchOnce(ctx context.Context, target string, f remoteFile) (string, bool, error) {
	final := p.cache.blobPath(f.blob)
	partial := final + ".incomplete"
	if err := os.MkdirAll(p.cache.blobPath(""), 0o755); err != nil {
		return "", false, diskError("creating", p.cache.blobPath(""), err)
	}
	out, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", false, diskError("creating", partial, err)
	}
	defer out.Close()
	d := newDigester(f.want)
	have, err := resumable(ctx, out, d, f.want.size)
	if err != nil {
		return "", false, fmt.Errorf("reading %s: %w", partial, err)
	}
	if have < f.want.size {
		if have > 0 {
			p.log.Info("resuming download", "file", f.name, "offset", have, "bytes", f.want.size)
		} else {
			p.log.Info("downloading file", "file", f.name, "bytes", f.want.size)
		}
		received, err := p.receive(ctx, target, out, d, have, f)
		p.downloaded.Add(received)
		if err != nil {
			if info, statErr := out.Stat(); statErr == nil && info.Size() == 0 {
				// Nothing to resume: leave no empty partial file behind.
				_ = out.Close()
				_ = os.Remove(partial)
			}
			return "", received > 0, err
		}
	}
	sum, err := d.check(f.name)
	if err != nil {
		_ = out.Close()
		_ = os.Remove(partial)
		if have > 0 {
			return "", false, transient(fmt.Errorf("the resumed download failed verification, restarting it: %w", err))
		}
		return "", false, err
	}
	if err := out.Sync(); err != nil {
		return "", true, diskError("syncing", partial, err)
	}
	if err := out.Close(); err != nil {
		return "", true, diskError("closing", partial, err)
	}
	if err := os.Rename(partial, final); err != nil {
		return "", true, diskError("renaming", partial, err)
	}
	p.log.Info("downloaded file", "file", f.name, "bytes", f.want.size)
	return sum, true, nil
}

// resumable hashes what an earlier attempt left in the partial file and
// returns its length; a partial file longer than the file is emptied.
func resumable(ctx context.Context, partial *os.File, d *digester, size int64) (int64, error) {
	have, err := partial.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	if have > size {
		if err := partial.Truncate(0); err != nil {
			return 0, err
		}
		return 0, nil
	}
	if _, err := partial.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(d, contextReader{ctx: ctx, r: io.LimitReader(partial, have)}, make([]byte, copyBuffer))
	if err == nil && n != have {
		err = io.ErrUnexpectedEOF
	}
	return have, err
}

// receive appends the file's bytes from offset have to out, asking the hub
// for a Range when have > 0, and returns how many bytes it wrote.
func (p *populator) receive(parent context.Context, target string, out *os.File, d *digester, have int64, f remoteFile) (int64, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	byteRange := ""
	if have > 0 {
		byteRange = "bytes=" + strconv.FormatInt(have, 10) + "-"
	}
	resp, err := p.hub.get(ctx, target, byteRange)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if have > 0 && (resp.StatusCode != http.StatusPartialContent || !startsAt(resp.Header.Get("Content-Range"), have)) {
		// The hub sent something other than the rest: start again from zero.
		if err := out.Truncate(0); err != nil {
			return 0, diskError("truncating", out.Name(), err)
		}
		return 0, transient(fmt.Errorf("%s: the hub did not resume at byte %d (HTTP %d)", f.name, have, resp.StatusCode))
	}
	if _, err := out.Seek(have, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seeking in %s: %w", out.Name(), err)
	}
	timer := time.AfterFunc(p.idle, func() { cancel(fmt.Errorf("%w: nothing received for %s", errStalled, p.idle)) })
	defer timer.Stop()
	// Read one byte more than announced, to tell a longer body from a complete one.
	body := io.LimitReader(resp.Body, f.want.size-have+1)
	progress := newProgress(p, f.name, have, f.want.size)
	buf := make([]byte, copyBuffer)
	var written int64
	for {
		n, readErr := body.Read(buf)
		timer.Reset(p.idle)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return written, diskError("writing", out.Name(), err)
			}
			_, _ = d.Write(buf[:n])
			written += int64(n)
			progress.advance(int64(n))
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
				readErr = cause
			}
			return written, networkError(parent, fmt.Errorf("receiving %s: %w", f.name, readErr))
		}
	}
	if have+written < f.want.size {
		return written, transient(fmt.Errorf("receiving %s: the hub sent %d of %d bytes", f.name, have+written, f.want.size))
	}
	return written, nil
}

// startsAt reports whether a Content-Range header ("bytes 100-199/200") starts at offset.
func startsAt(contentRange string, offset int64) bool {
	rest, ok := strings.CutPrefix(contentRange, "bytes ")
	if !ok {
		return false
	}
	start, _, ok := strings.Cut(rest, "-")
	return ok && start == strconv.FormatInt(offset, 10)
}

// contextReader stops a long read from disk when its context ends.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}

// progress logs a large download every tenth of its size.
type progress struct {
	p          *populator
	name       string
	done, next int64
	size       int64
}

func newProgress(p *populator, name string, done, size int64) *progress {
	pr := &progress{p: p, name: name, done: done, size: size, next: size + 1}
	if size >= progressMinSize {
		pr.next = (done/(size/10) + 1) * (size / 10)
	}
	return pr
}

func (pr *progress) advance(n int64) {
	pr.done += n
	if pr.done < pr.next {
		return
	}
	pr.p.log.Info("download progress", "file", pr.name, "bytes", pr.done, "of", pr.size, "percent", pr.done*100/pr.size)
	pr.next = (pr.done/(pr.size/10) + 1) * (pr.size / 10)
}
