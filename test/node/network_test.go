//go:build linux

package node

import (
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

// TestNodeHasNoRouteOut checks issue 24's network rule where it is
// enforced: the node's network namespace routes nothing but its own
// addresses, so a connection to an address outside it fails before any
// packet is sent (203.0.113.1 is TEST-NET-3, RFC 5737).
func TestNodeHasNoRouteOut(t *testing.T) {
	requireNode(t)
	_, err := node.Dial(t.Context(), "tcp", "203.0.113.1:80")
	NewWithT(t).Expect(err).To(MatchError(syscall.ENETUNREACH))
}
