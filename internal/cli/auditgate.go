package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/embedops/embedops/internal/audit"
)

// ExitGate is the exit status of `embedops audit` when --require-attested
// or --require-verified finds a binding that does not pass.
const ExitGate = 4

// ErrNotAttested is returned under --require-attested when a binding's
// revision is Declared or Unattested.
var ErrNotAttested = errors.New("a recorded revision is not attested by Flux or Argo CD")

// ErrNotVerified is returned under --require-verified when a binding is
// not Verified.
var ErrNotVerified = errors.New("a recorded decision is not Verified")

// gate applies --require-attested and --require-verified to the results,
// naming the bindings that fail.
func gate(opts auditOptions, results []audit.Result) error {
	if opts.requireAttested {
		if failed := audit.NotAttested(results); len(failed) > 0 {
			return fmt.Errorf("%w: %s", ErrNotAttested, bindingNames(failed))
		}
	}
	if opts.requireVerified {
		var failed []audit.Result
		for _, r := range results {
			if r.Result != audit.Verified {
				failed = append(failed, r)
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("%w: %s", ErrNotVerified, bindingNames(failed))
		}
	}
	return nil
}

// bindingNames lists the results' bindings with what each is.
func bindingNames(results []audit.Result) string {
	names := make([]string, 0, len(results))
	for _, r := range results {
		names = append(names, fmt.Sprintf("%s (%s, %s)", r.Binding, r.Attestation, r.Result))
	}
	return strings.Join(names, ", ")
}
