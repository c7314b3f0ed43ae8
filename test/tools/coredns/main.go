// Command coredns is CoreDNS with only the plugins the real node's cluster
// DNS uses: kubernetes (Service and pod records from the API server),
// errors, health and ready. No forward or cache plugin: names outside the
// cluster are not resolved, so no pod query leaves the node's network
// namespace (issue 24's network rule).
package main

import (
	// The directive order CoreDNS's plugin.cfg generates; a plugin runs
	// only when it is also imported below.
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
