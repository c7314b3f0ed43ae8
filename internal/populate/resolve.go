package populate

import (
	"context"
	"fmt"
)

// Resolve asks the hub which commit opts.Revision names, as Run does before
// it downloads, and returns a Result holding only that commit: it reads and
// writes no cache (opts.Dir is ignored), so a controller can pin every
// replica to one commit before any of them starts. A commit revision is
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
	p.log.Info("resolved revision", "model", p.model, "revision", p.revision, "commit", info.SHA)
	return &Result{ResolvedCommit: info.SHA}, nil
}
