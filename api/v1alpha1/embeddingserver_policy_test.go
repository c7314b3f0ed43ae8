package v1alpha1_test

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/test/harness"
)

const minimalModel = "model:\n  name: BAAI/bge-small-en-v1.5\n"

// peerCases are networkPolicy.from lists, valid and not; message is the
// CRD's refusal, empty for a list it accepts.
var peerCases = []struct {
	name, from, message string
}{
	{"empty list", "[]", ""},
	{"every pod of the namespace", "- podSelector: {}", ""},
	{"pods of a namespace", "- namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: gateway}}\n  podSelector: {matchLabels: {app: envoy}}", ""},
	{"an IPv4 block with an exception", "- ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}", ""},
	{"an IPv6 block", "- ipBlock: {cidr: \"2001:db8::/32\"}", ""},
	{"set-based selectors", "- podSelector: {matchExpressions: [{key: tier, operator: In, values: [web]}]}\n  namespaceSelector: {matchExpressions: [{key: team, operator: Exists}]}", ""},
	{"an empty peer", "- {}", "each peer must set podSelector, namespaceSelector or ipBlock"},
	{"ipBlock with a podSelector", "- ipBlock: {cidr: 10.0.0.0/8}\n  podSelector: {}", "a peer may not set ipBlock together with podSelector or namespaceSelector"},
	{"ipBlock with a namespaceSelector", "- ipBlock: {cidr: 10.0.0.0/8}\n  namespaceSelector: {}", "a peer may not set ipBlock together with podSelector or namespaceSelector"},
	{"an address, not a CIDR", "- ipBlock: {cidr: 10.0.0.1}", "ipBlock.cidr must be a CIDR"},
	{"not an address", "- ipBlock: {cidr: office}", "ipBlock.cidr must be a CIDR"},
	{"an exception outside the block", "- ipBlock: {cidr: 10.0.0.0/16, except: [192.168.0.0/24]}", "each ipBlock.except must be a CIDR strictly inside ipBlock.cidr"},
	{"an exception equal to the block", "- ipBlock: {cidr: 10.0.0.0/16, except: [10.0.0.0/16]}", "each ipBlock.except must be a CIDR strictly inside ipBlock.cidr"},
	{"an unknown operator", "- podSelector: {matchExpressions: [{key: tier, operator: Equals, values: [web]}]}", `Unsupported value: "Equals"`},
	{"In without values", "- podSelector: {matchExpressions: [{key: tier, operator: In}]}", "matchExpressions with In or NotIn need values, with Exists or DoesNotExist none"},
	{"Exists with values", "- namespaceSelector: {matchExpressions: [{key: team, operator: Exists, values: [a]}]}", "matchExpressions with In or NotIn need values, with Exists or DoesNotExist none"},
	{"a label key with a space", "- podSelector: {matchLabels: {\"bad key\": web}}", "matchLabels keys must be valid label keys"},
	{"a label value too long", "- namespaceSelector: {matchLabels: {team: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}", "spec.networkPolicy.from[0].namespaceSelector.matchLabels.team: Too long"},
	{"a label value starting with a dash", "- podSelector: {matchLabels: {app: -web}}", "spec.networkPolicy.from[0].podSelector.matchLabels.app in body should match"},
	{"a requirement key with a space", "- podSelector: {matchExpressions: [{key: \"bad key\", operator: Exists}]}", "spec.networkPolicy.from[0].podSelector.matchExpressions[0].key in body should match"},
	{"a requirement value with a space", "- podSelector: {matchExpressions: [{key: tier, operator: In, values: [\"a b\"]}]}", "spec.networkPolicy.from[0].podSelector.matchExpressions[0].values[0] in body should match"},
}

func TestNetworkPolicyPeersAreCheckedAsTheAPIServerChecksThem(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	for _, tc := range peerCases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := minimalModel + "networkPolicy:\n  from:\n" + indent(tc.from, "    ")
			serverErr := env.Client.Create(t.Context(), serverManifest(t, namespace, "s", spec), client.DryRunAll)
			policyErr := createPolicyWithPeers(t, namespace, tc.from)
			if tc.message == "" {
				g.Expect(serverErr).NotTo(HaveOccurred())
				g.Expect(policyErr).NotTo(HaveOccurred(), "the API server refuses a NetworkPolicy with peers the CRD accepts")
				return
			}
			g.Expect(serverErr).To(HaveOccurred(), "the CRD accepts peers the API server refuses")
			g.Expect(serverErr.Error()).To(ContainSubstring(tc.message))
			g.Expect(policyErr).To(HaveOccurred(), "the CRD refuses peers the API server accepts")
		})
	}
}

// createPolicyWithPeers dry-runs a NetworkPolicy whose ingress rule has the
// peers of from (YAML), the API server's own verdict on them.
func createPolicyWithPeers(t *testing.T, namespace, from string) error {
	t.Helper()
	var peers []networkingv1.NetworkPolicyPeer
	if err := yaml.Unmarshal([]byte(from), &peers); err != nil {
		t.Fatalf("parsing peers: %v", err)
	}
	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: namespace},
		Spec:       networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: peers}}},
	}
	return env.Client.Create(t.Context(), policy, client.DryRunAll)
}

func TestDisruptionBudgetsAreCheckedAsTheAPIServerChecksThem(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	cases := []struct {
		name, budget, message string
	}{
		{"maxUnavailable", "maxUnavailable: 1", ""},
		{"maxUnavailable percentage", "maxUnavailable: 25%", ""},
		{"minAvailable zero", "minAvailable: 0", ""},
		{"minAvailable all", "minAvailable: 100%", ""},
		{"both", "maxUnavailable: 1\nminAvailable: 1", "disruptionBudget must set exactly one of maxUnavailable and minAvailable"},
		{"negative maxUnavailable", "maxUnavailable: -1", "maxUnavailable must be a non-negative integer or a percentage from 0% to 100%"},
		{"more than all", "maxUnavailable: 150%", "maxUnavailable must be a non-negative integer or a percentage from 0% to 100%"},
		{"a word", "minAvailable: half", "minAvailable must be a non-negative integer or a percentage from 0% to 100%"},
		{"a fraction", "minAvailable: 1.5%", "minAvailable must be a non-negative integer or a percentage from 0% to 100%"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := minimalModel + "replicas: 3\ndisruptionBudget:\n" + indent(tc.budget, "  ")
			serverErr := env.Client.Create(t.Context(), serverManifest(t, namespace, "s", spec), client.DryRunAll)
			budgetErr := createBudget(t, namespace, tc.budget)
			if tc.message == "" {
				g.Expect(serverErr).NotTo(HaveOccurred())
				g.Expect(budgetErr).NotTo(HaveOccurred(), "the API server refuses a budget the CRD accepts")
				return
			}
			g.Expect(serverErr).To(HaveOccurred(), "the CRD accepts a budget the API server refuses")
			g.Expect(serverErr.Error()).To(ContainSubstring(tc.message))
			g.Expect(budgetErr).To(HaveOccurred(), "the CRD refuses a budget the API server accepts")
		})
	}
}

func TestDisruptionBudgetMustSetALimit(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	err := env.Client.Create(t.Context(), serverManifest(t, namespace, "s", minimalModel+"disruptionBudget: {}\n"), client.DryRunAll)
	g.Expect(err).To(MatchError(ContainSubstring("disruptionBudget must set exactly one of maxUnavailable and minAvailable")))
}

// createBudget dry-runs a PodDisruptionBudget with budget's limits (YAML).
func createBudget(t *testing.T, namespace, budget string) error {
	t.Helper()
	var limits struct {
		MaxUnavailable *intstr.IntOrString `json:"maxUnavailable"`
		MinAvailable   *intstr.IntOrString `json:"minAvailable"`
	}
	if err := yaml.Unmarshal([]byte(budget), &limits); err != nil {
		t.Fatalf("parsing the budget: %v", err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: limits.MaxUnavailable,
			MinAvailable:   limits.MinAvailable,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
		},
	}
	return env.Client.Create(t.Context(), pdb, client.DryRunAll)
}

// spec.rollout.maxSurge takes what a Deployment's maxSurge takes, a count
// or a percentage of the replicas, and is refused at admission otherwise.
func TestRolloutMaxSurgeIsCheckedAtAdmission(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	cases := []struct {
		name, surge, message string
	}{
		{"in place", "0", ""},
		{"one", "1", ""},
		{"a percentage", "25%", ""},
		{"all", "100%", ""},
		{"negative", "-1", "maxSurge must be a non-negative integer or a percentage from 0% to 100%"},
		{"more than all", "150%", "maxSurge must be a non-negative integer or a percentage from 0% to 100%"},
		{"a word", "some", "maxSurge must be a non-negative integer or a percentage from 0% to 100%"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := minimalModel + "rollout:\n  maxSurge: " + tc.surge + "\n"
			err := env.Client.Create(t.Context(), serverManifest(t, namespace, "s", spec), client.DryRunAll)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
		})
	}
}
