package builder

import (
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// Facts are what the controller knows of the cluster and of itself that
// shape a server's children. The zero value suits an IPv4 or dual-stack
// cluster, no endpoint check and populate Jobs without a deadline.
type Facts struct {
	// IPv6 reports that the server's Service lists IPv6 in spec.ipFamilies:
	// TEI then listens on "::" (see listenAddress).
	IPv6 bool
	// Prober selects the operator's own pods, which ask each ready pod's
	// /info when the endpoint check is on; the NetworkPolicy admits them to
	// the HTTP port. Nil when the check is off.
	Prober *networkingv1.NetworkPolicyPeer
	// PopulateDeadline bounds a populate Job's run
	// (activeDeadlineSeconds): past it the Job fails with reason
	// DeadlineExceeded, whatever held its pod (an image pull, a node that
	// never came). Zero means no deadline.
	PopulateDeadline time.Duration
}

// listenAddress is TEI's --hostname: the wildcard of the pod's address
// family. TEI binds exactly the address it parses (router/src/lib.rs,
// v1.9.3: `hostname.parse()` -> SocketAddr), so "0.0.0.0" never answers on
// an IPv6-only pod's address, where the kubelet's probes arrive. "::" on
// Linux also accepts IPv4 (net.ipv6.bindv6only=0, the default), which
// kubectl port-forward's dial of localhost needs on a dual-stack pod; but it
// fails where the kernel has IPv6 disabled, so it is chosen only where the
// Service says the cluster has IPv6.
func (f Facts) listenAddress() string {
	if f.IPv6 {
		return "::"
	}
	return "0.0.0.0"
}
