package populate

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// Resolve asks the hub which commit opts.Revision names, as Run does before
// it downloads, and returns a Result holding that commit and what it lists
// (listed): it writes no cache (opts.Dir is ignored), so a controller can
// pin every replica to one commit before any of them starts, and check
// the room for it. A commit revision is
// returned as it is, without asking the hub. Transient failures are
// retried as Run's are; with no cache to fall back on, a hub that stays
// unreachable is an error.
func Resolve(ctx context.Context, opts Options) (*Result, error) {
	p, err := newPopulator(opts)
	if err != nil {
		return nil, err
	}
	if isCommit(p.revision) {
		return &Result{ResolvedCommit: p.revision}, nil
	}
	info, err := p.hub.resolve(ctx, p.model, p.revision)
	if err != nil {
		return nil, err
	}
	if !isCommit(info.SHA) {
		return nil, fmt.Errorf("%w answer: the hub resolved %q to %q, not a commit id", ErrInvalid, p.revision, info.SHA)
	}
	result, err := p.listed(ctx, info)
	if err != nil {
		return nil, err
	}
	p.log.Info("resolved revision", "model", p.model, "revision", p.revision, "commit", info.SHA,
		"files", result.Files, "bytes", result.Bytes, "repositoryBytes", result.RepositoryBytes)
	return result, nil
}

// listed is what the commit info names lists, as Run would cache it: the
// files its selection reads (wanted; the small files the selection reads
// to decide, such as modules.json, are read from the hub into memory, not
// cached), their count and, when the hub listed their sizes, their bytes
// and every listed file's (RepositoryBytes). A controller checks the room
// for the revision with them before any pod downloads it.
func (p *populator) listed(ctx context.Context, info *revisionInfo) (*Result, error) {
	listing, err := planFiles(info.Siblings)
	if err != nil {
		return nil, fmt.Errorf("model %q at %s: %w", p.model, info.SHA, err)
	}
	names, err := p.wanted(listing, func(name string) ([]byte, error) { return p.hub.readFile(ctx, p.model, info.SHA, name) })
	if err != nil {
		return nil, fmt.Errorf("model %q at %s: %w", p.model, info.SHA, err)
	}
	slices.Sort(names)
	var selected []remoteFile
	for _, f := range listing {
		if slices.Contains(names, f.name) {
			selected = append(selected, f)
		}
	}
	return &Result{ResolvedCommit: info.SHA, Files: len(names), Names: names, Bytes: listedSize(selected), RepositoryBytes: listedSize(listing)}, nil
}

// readFile reads a small file of a commit from the hub into memory, up to
// maxReadSize, retrying as every request is.
func (h *hub) readFile(ctx context.Context, model, commit, name string) ([]byte, error) {
	var data []byte
	err := h.retry.run(ctx, "reading "+name, func(ctx context.Context) (bool, error) {
		resp, err := h.get(ctx, h.fileURL(model, commit, name), "")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		read, err := io.ReadAll(io.LimitReader(resp.Body, maxReadSize+1))
		if err != nil {
			return false, networkError(ctx, fmt.Errorf("reading %s: %w", name, err))
		}
		if len(read) > maxReadSize {
			return false, fmt.Errorf("%w: %s has more than the %d bytes populate reads", ErrInvalid, name, maxReadSize)
		}
		data = read
		return false, nil
	})
	if err != nil {
		return nil, h.explain(ctx, err, subject{model: model, revision: commit, file: name})
	}
	return data, nil
}
