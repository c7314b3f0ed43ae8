package cli

import (
	"errors"
	"fmt"
)

// ExitUsage is the exit status for usage and I/O errors.
const ExitUsage = 2

// usageError marks an error the user made on the command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// IsUsageError reports whether err is a command-line mistake.
func IsUsageError(err error) bool {
	var usage *usageError
	return errors.As(err, &usage)
}

// ExitCode is the process exit status for an error RunE returned: 1 for a
// Mismatch, 3 for a change that releases data (diff --fail-on-retire), 4
// for a binding an audit gate refuses (--require-attested,
// --require-verified), 2 for usage and I/O errors.
func ExitCode(err error) int {
	switch {
	case errors.Is(err, ErrMismatch):
		return 1
	case errors.Is(err, ErrNotAttested), errors.Is(err, ErrNotVerified):
		return ExitGate
	case errors.Is(err, ErrRetires):
		return ExitRetires
	default:
		return ExitUsage
	}
}
