package populate

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

var (
	// ErrAccessDenied is wrapped when the hub answers 401 or 403: the token is
	// missing, invalid, or not granted access to a private or gated model.
	ErrAccessDenied = errors.New("the hub refused the token: set HF_TOKEN / check tokenSecretRef")

	// ErrNotFound is wrapped when the model, its revision or one of its files
	// does not exist on the hub; the message names which.
	ErrNotFound = errors.New("not found on the hub")

	// ErrCorrupt is wrapped when content does not match the size or digest the
	// hub listed, or when a cached snapshot does not match its manifest.
	ErrCorrupt = errors.New("content does not match its digest")

	// ErrDiskFull is wrapped when the cache directory has no space or quota left.
	ErrDiskFull = errors.New("no space left in the cache directory: raise cache.size")

	// ErrInvalid is wrapped when a model id, a revision or a name in the hub's
	// listing is not acceptable.
	ErrInvalid = errors.New("invalid")
)

// DiskFullReason is the reason a failed run gives in its termination
// message when the cache ran out of space or quota (ErrDiskFull), so the
// controller tells a claim without room from any other failure without
// reading the error's words (FailureReason).
const DiskFullReason = "DiskFull"

// FailureReason is the reason a failed run's termination message gives
// for err: DiskFullReason when it wraps ErrDiskFull, "" otherwise.
func FailureReason(err error) string {
	if errors.Is(err, ErrDiskFull) {
		return DiskFullReason
	}
	return ""
}

// transientError marks a failure worth retrying: a network error, a cut-off
// body, or a 408, 429 or 5xx answer.
type transientError struct {
	err error
	// after is the wait the hub asked for in Retry-After, if any.
	after time.Duration
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// transient marks err as worth retrying.
func transient(err error) error { return &transientError{err: err} }

// isTransient reports whether err, or an error it wraps, is worth retrying.
func isTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

// retryAfter returns the wait the hub asked for, if err carries one.
func retryAfter(err error) time.Duration {
	var t *transientError
	if errors.As(err, &t) {
		return t.after
	}
	return 0
}

// networkError wraps an error of a request or a body read: transient unless
// the caller's context ended it.
func networkError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return transient(err)
}

// diskError wraps a failed write to the cache, naming ErrDiskFull when the
// file system is out of space or quota.
func diskError(op, path string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %s %s: %w", ErrDiskFull, op, path, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}
