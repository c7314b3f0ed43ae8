package builder

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// NetworkPolicy returns the NetworkPolicy "<name>" of a server with
// spec.networkPolicy, nil without. It selects the server's pods and admits
// ingress on the HTTP port and TEI's metrics port (metricsPort) from
// spec.networkPolicy.from, or from the pods of the server's namespace when
// the list is empty; and, when the endpoint check is on (facts.Prober), the
// operator's pods on the HTTP port, where they ask /info. Its only policy
// type is Ingress, so egress (the model download) stays open.
func NetworkPolicy(server *embedopsv1.EmbeddingServer, facts Facts) *networkingv1.NetworkPolicy {
	if server.Spec.NetworkPolicy == nil {
		return nil
	}
	ingress := []networkingv1.NetworkPolicyIngressRule{{
		Ports: policyPorts(server),
		From:  peers(server.Spec.NetworkPolicy.From),
	}}
	if facts.Prober != nil {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{tcpPort(port(server))},
			From:  []networkingv1.NetworkPolicyPeer{*facts.Prober.DeepCopy()},
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(server, server.Name),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels(server)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}

// peers are the admitted peers: from as NetworkPolicyPeers, or every pod of
// the policy's own namespace (an empty podSelector without a
// namespaceSelector) when from is empty. An ingress rule with no peers would
// admit everyone.
func peers(from []embedopsv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer {
	if len(from) == 0 {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	}
	converted := make([]networkingv1.NetworkPolicyPeer, 0, len(from))
	for _, peer := range from {
		out := networkingv1.NetworkPolicyPeer{
			PodSelector:       labelSelector(peer.PodSelector),
			NamespaceSelector: labelSelector(peer.NamespaceSelector),
		}
		if peer.IPBlock != nil {
			out.IPBlock = &networkingv1.IPBlock{CIDR: peer.IPBlock.CIDR, Except: slices.Clone(peer.IPBlock.Except)}
		}
		converted = append(converted, out)
	}
	return converted
}

// labelSelector is a peer selector as a metav1.LabelSelector; nil stays nil.
func labelSelector(in *embedopsv1.PeerSelector) *metav1.LabelSelector {
	if in == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if in.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(in.MatchLabels))
		for key, value := range in.MatchLabels {
			out.MatchLabels[key] = string(value)
		}
	}
	for _, requirement := range in.MatchExpressions {
		values := make([]string, 0, len(requirement.Values))
		for _, value := range requirement.Values {
			values = append(values, string(value))
		}
		if len(values) == 0 {
			values = nil
		}
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: requirement.Key, Operator: requirement.Operator, Values: values,
		})
	}
	return out
}

// tcpPort is a numbered TCP port of an ingress rule.
func tcpPort(number int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: new(corev1.ProtocolTCP), Port: new(intstr.FromInt32(number))}
}

// policyPorts are the HTTP port and, when it is another, TEI's metrics port.
func policyPorts(server *embedopsv1.EmbeddingServer) []networkingv1.NetworkPolicyPort {
	ports := []networkingv1.NetworkPolicyPort{tcpPort(port(server))}
	if metrics := metricsPort(server); metrics != port(server) {
		ports = append(ports, tcpPort(metrics))
	}
	return ports
}
