package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func withNetworkPolicy(from ...embedopsv1.NetworkPolicyPeer) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.NetworkPolicy = &embedopsv1.NetworkPolicySpec{From: from}
	}
}

// labelSet is a label map as a labels.Set.
func labelSet(m map[string]string) labels.Set { return m }

func TestNetworkPolicy(t *testing.T) {
	gateway := embedopsv1.NetworkPolicyPeer{
		NamespaceSelector: &embedopsv1.PeerSelector{MatchLabels: map[string]embedopsv1.LabelValue{"kubernetes.io/metadata.name": "gateway"}},
		PodSelector: &embedopsv1.PeerSelector{MatchExpressions: []embedopsv1.PeerSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []embedopsv1.LabelValue{"envoy", "nginx"}},
			{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
		}},
	}
	office := embedopsv1.NetworkPolicyPeer{IPBlock: &embedopsv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}
	allPods := embedopsv1.NetworkPolicyPeer{PodSelector: &embedopsv1.PeerSelector{}}
	wantGateway := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "gateway"}},
		PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"envoy", "nginx"}},
			{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
		}},
	}
	wantOffice := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}
	sameNamespace := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}
	cases := []struct {
		name     string
		server   *embedopsv1.EmbeddingServer
		wantNone bool
		wantPort int32
		wantFrom []networkingv1.NetworkPolicyPeer
	}{
		{name: "no networkPolicy", server: server("s"), wantNone: true},
		{name: "empty list: the namespace's pods", server: server("s", withNetworkPolicy()), wantPort: 8080, wantFrom: []networkingv1.NetworkPolicyPeer{sameNamespace}},
		{name: "listed peers", server: server("s", withNetworkPolicy(gateway, office)), wantPort: 8080, wantFrom: []networkingv1.NetworkPolicyPeer{wantGateway, wantOffice}},
		{name: "all pods of the namespace, listed", server: server("s", withNetworkPolicy(allPods)), wantPort: 8080, wantFrom: []networkingv1.NetworkPolicyPeer{sameNamespace}},
		{name: "another port", server: server("s", fixtures.WithPort(3000), withNetworkPolicy(office)), wantPort: 3000, wantFrom: []networkingv1.NetworkPolicyPeer{wantOffice}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			policy := builder.NetworkPolicy(tc.server, builder.Facts{})
			if tc.wantNone {
				g.Expect(policy).To(BeNil())
				return
			}
			g.Expect(policy.APIVersion).To(Equal("networking.k8s.io/v1"))
			g.Expect(policy.Kind).To(Equal("NetworkPolicy"))
			g.Expect(policy.Name).To(Equal(tc.server.Name))
			g.Expect(policy.Namespace).To(Equal(testNamespace))
			g.Expect(policy.OwnerReferences).To(BeEmpty())
			g.Expect(policy.Labels).To(Equal(builder.Labels(tc.server)))
			g.Expect(policy.Spec.PodSelector).To(Equal(metav1.LabelSelector{MatchLabels: builder.SelectorLabels(tc.server)}))
			g.Expect(policy.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}), "egress stays open")
			g.Expect(policy.Spec.Egress).To(BeEmpty())
			tcp := corev1.ProtocolTCP
			httpPort, metricsPort := intstr.FromInt32(tc.wantPort), intstr.FromInt32(9000)
			g.Expect(policy.Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &httpPort}, {Protocol: &tcp, Port: &metricsPort}},
				From:  tc.wantFrom,
			}}))
		})
	}
}

func TestNetworkPolicySelectsTheStatefulSetPods(t *testing.T) {
	g := NewWithT(t)
	s := server("s", withNetworkPolicy())
	sts, err := builder.StatefulSet(s, nil, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	policy := builder.NetworkPolicy(s, builder.Facts{})
	selector, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector.Matches(labelSet(sts.Spec.Template.Labels))).To(BeTrue())
}

func TestNetworkPolicyDoesNotAliasTheSpec(t *testing.T) {
	g := NewWithT(t)
	peer := embedopsv1.NetworkPolicyPeer{IPBlock: &embedopsv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}
	s := server("s", withNetworkPolicy(peer))
	policy := builder.NetworkPolicy(s, builder.Facts{})
	policy.Spec.Ingress[0].From[0].IPBlock.Except[0] = "10.2.0.0/16"
	g.Expect(s.Spec.NetworkPolicy.From[0].IPBlock.Except).To(Equal([]string{"10.1.0.0/16"}))
}

func TestNetworkPolicyAdmitsTheEndpointCheckToTheHTTPPort(t *testing.T) {
	g := NewWithT(t)
	peer := embedopsv1.NetworkPolicyPeer{PodSelector: &embedopsv1.PeerSelector{MatchLabels: map[string]embedopsv1.LabelValue{"role": "client"}}}
	s := server("s", withNetworkPolicy(peer), fixtures.WithPort(9090))
	prober := &networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "embedops-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"control-plane": "controller-manager"}},
	}
	policy := builder.NetworkPolicy(s, builder.Facts{Prober: prober})
	g.Expect(policy.Spec.Ingress).To(HaveLen(2))
	g.Expect(policy.Spec.Ingress[1].From).To(Equal([]networkingv1.NetworkPolicyPeer{*prober}))
	g.Expect(policy.Spec.Ingress[1].Ports).To(ConsistOf(HaveField("Port", HaveValue(Equal(intstr.FromInt32(9090))))), "only the port /info is asked on")
	g.Expect(builder.NetworkPolicy(s, builder.Facts{}).Spec.Ingress).To(HaveLen(1), "no check, no rule for it")
}
