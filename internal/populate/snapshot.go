package populate

import (
	"context"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sync/errgroup"
)

// DefaultParallelDownloads is how many files populate fetches at once: on a
// fast link one stream is bound by its own hashing and writing, not by the
// network. huggingface_hub's snapshot_download fetches 8 files at once
// (max_workers=8); 4 keeps a small node's disk and CPUs for the server.
const DefaultParallelDownloads = 4

// maxReadSize bounds a file populate reads to learn which others TEI needs
// (a safetensors index, modules.json).
const maxReadSize = 64 << 20

// snapshot brings the files of one commit into the cache, each once.
type snapshot struct {
	p       *populator
	commit  string
	listing map[string]remoteFile
	mu      sync.Mutex
	done    map[string]fileRecord
}

func newSnapshot(p *populator, commit string, files []remoteFile) *snapshot {
	listing := make(map[string]remoteFile, len(files))
	for _, f := range files {
		listing[f.name] = f
	}
	return &snapshot{p: p, commit: commit, listing: listing, done: map[string]fileRecord{}}
}

// ensure makes the listed file verified in the cache and linked into the
// snapshot, and returns its record.
func (s *snapshot) ensure(ctx context.Context, name string) (fileRecord, error) {
	if record, ok := s.recorded(name); ok {
		return record, nil
	}
	f, ok := s.listing[name]
	if !ok {
		return fileRecord{}, fmt.Errorf("%w listing: file %q is not listed", ErrInvalid, name)
	}
	if f.blob == "" {
		var err error
		if f, err = s.p.hub.metadata(ctx, s.p.model, s.commit, name); err != nil {
			return fileRecord{}, err
		}
	}
	record, err := s.p.ensureBlob(ctx, s.commit, f)
	if err != nil {
		return fileRecord{}, err
	}
	if err := s.p.cache.link(s.commit, record); err != nil {
		return fileRecord{}, err
	}
	s.mu.Lock()
	s.done[name] = record
	s.mu.Unlock()
	return record, nil
}

// recorded is the record of a file already ensured.
func (s *snapshot) recorded(name string) (fileRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	record, ok := s.done[name]
	return record, ok
}

// ensureAll ensures every named file, Options.Parallel at a time, and
// returns their records in the names' order. The first failure cancels
// the others; each leaves its partial file to resume from.
func (s *snapshot) ensureAll(ctx context.Context, names []string) ([]fileRecord, error) {
	records := make([]fileRecord, len(names))
	group, ctx := errgroup.WithContext(ctx)
	group.SetLimit(s.p.parallel)
	for i, name := range names {
		if ctx.Err() != nil {
			break
		}
		group.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err // a download failed: start no other
			}
			record, err := s.ensure(ctx, name)
			records[i] = record
			return err
		})
	}
	if err := group.Wait(); err != nil {
		return nil, err
	}
	return records, nil
}

// read returns the content of a listed file, which it ensures first.
func (s *snapshot) read(ctx context.Context, name string) ([]byte, error) {
	record, err := s.ensure(ctx, name)
	if err != nil {
		return nil, err
	}
	if record.Size > maxReadSize {
		return nil, fmt.Errorf("%w: %s has %d bytes, more than the %d populate reads", ErrInvalid, name, record.Size, maxReadSize)
	}
	data, err := os.ReadFile(s.p.cache.blobPath(record.Blob))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return data, nil
}
