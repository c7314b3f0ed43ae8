package builder

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// NetworkPolicy returns the NetworkPolicy "<name>" of a server with
// spec.networkPolicy, nil without. It selects the server's pods and admits
// ingress on the HTTP port and MetricsPort from spec.networkPolicy.from, or
// from the pods of the server's namespace when the list is empty. Its only
// policy type is Ingress, so egress (the model download) stays open.
func NetworkPolicy(server *embedopsv1.EmbeddingServer) *networkingv1.NetworkPolicy {
	if server.Spec.NetworkPolicy == nil {
		return nil
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(server, server.Name),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels(server)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{
					tcpPort(port(server)),
					tcpPort(MetricsPort),
				},
				From: peers(server.Spec.NetworkPolicy.From),
			}},
		},
	}
}

// peers are the admitted peers: a copy of from, or every pod of the policy's
// own namespace (an empty podSelector without a namespaceSelector) when from
// is empty. An ingress rule with no peers would admit everyone.
func peers(from []networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer {
	if len(from) == 0 {
		return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	}
	copied := make([]networkingv1.NetworkPolicyPeer, len(from))
	for i := range from {
		from[i].DeepCopyInto(&copied[i])
	}
	return copied
}

// tcpPort is a numbered TCP port of an ingress rule.
func tcpPort(number int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: new(corev1.ProtocolTCP), Port: new(intstr.FromInt32(number))}
}
