package populate

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Retry defaults: 5 attempts, waiting 1s, 2s, 4s and 8s between them.
const (
	DefaultMaxAttempts = 5
	defaultBackoffBase = time.Second
	defaultBackoffCap  = 30 * time.Second
)

// ExponentialBackoff returns the wait before retry n (0 for the first retry):
// base doubled n times, at most limit.
func ExponentialBackoff(base, limit time.Duration) func(retry int) time.Duration {
	return func(retry int) time.Duration {
		wait := base
		for range retry {
			if wait >= limit/2 {
				return limit
			}
			wait *= 2
		}
		return min(wait, limit)
	}
}

// SleepContext waits for d or until ctx ends, whichever is first.
func SleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// retrier runs an operation until it succeeds, fails for good, or has failed
// transiently maxAttempts times in a row.
type retrier struct {
	maxAttempts int
	backoff     func(retry int) time.Duration
	sleep       func(context.Context, time.Duration) error
	log         *slog.Logger
}

// run calls op until it succeeds or fails for good. op reports whether it made
// progress (wrote bytes) before failing; progress resets the count, so a long
// download over a flaky link is bounded by its size, not by maxAttempts.
func (r retrier) run(ctx context.Context, what string, op func(context.Context) (bool, error)) error {
	failures := 0
	for {
		progressed, err := op(ctx)
		if err == nil || !isTransient(err) || ctx.Err() != nil {
			// A cancelled run (or one a parallel download's failure
			// ended) is not retried, whatever the error looks like.
			return err
		}
		if progressed {
			failures = 0
		}
		failures++
		if failures >= r.maxAttempts {
			return fmt.Errorf("%s: giving up after %d attempts: %w", what, failures, err)
		}
		wait := max(r.backoff(failures-1), retryAfter(err))
		r.log.Info("retrying", "operation", what, "attempt", failures+1, "wait", wait, "error", err.Error())
		if err := r.sleep(ctx, wait); err != nil {
			return err
		}
	}
}
