package harness

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// ServiceRouted reports, as an error, why pods cannot reach the Service
// namespace/name by its name yet; nil once they can: CoreDNS (at
// NodeAddress) resolves the name to the ClusterIP, and kube-proxy's
// KUBE-SERVICES rule for that address jumps to the Service's chain, which
// it writes only once an endpoint is ready (kubernetes v1.37.2
// pkg/proxy/iptables/proxier.go). Both follow a pod's readiness
// asynchronously (the EndpointSlice controller, then their watches): a pod
// that reaches the Service before, as TEI downloading from the hub
// stand-in, is refused, and TEI exits on a failed download. The node's
// namespace has no route to ClusterIPs, so the rule is read, not dialled.
// Callers poll it.
func (n *Node) ServiceRouted(ctx context.Context, namespace, name string) error {
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return n.Dial(ctx, network, net.JoinHostPort(NodeAddress, "53"))
	}}
	host := fmt.Sprintf("%s.%s.svc.%s", name, namespace, ClusterDomain)
	addresses, err := resolver.LookupHost(ctx, host)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", host, err)
	}
	rules, err := exec.CommandContext(ctx, "ip", "netns", "exec", n.network.name, "iptables", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput()
	if err != nil {
		return fmt.Errorf("reading kube-proxy's rules: %w: %s", err, strings.TrimSpace(string(rules)))
	}
	for _, rule := range strings.Split(string(rules), "\n") {
		if strings.Contains(rule, "-d "+addresses[0]+"/32 ") && strings.Contains(rule, "-j KUBE-SVC-") {
			return nil
		}
	}
	return fmt.Errorf("kube-proxy routes no endpoint of %s's ClusterIP %s yet", host, addresses[0])
}
