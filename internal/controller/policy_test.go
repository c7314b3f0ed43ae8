package controller

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func withNetworkPolicy(from ...embedopsv1.NetworkPolicyPeer) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.NetworkPolicy = &embedopsv1.NetworkPolicySpec{From: from} }
}

func withoutNetworkPolicy() fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.NetworkPolicy = nil }
}

func withMinAvailable(value intstr.IntOrString) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.DisruptionBudget = &embedopsv1.DisruptionBudgetSpec{MinAvailable: &value}
	}
}

// inventoryIDs are the IDs of the server's status.inventory.
func inventoryIDs(t *testing.T, g Gomega, key types.NamespacedName) []string {
	t.Helper()
	server := getServer(t, g, key)
	if server.Status.Inventory == nil {
		return nil
	}
	ids := make([]string, 0, len(server.Status.Inventory.Entries))
	for _, entry := range server.Status.Inventory.Entries {
		ids = append(ids, entry.ID)
	}
	return ids
}

func TestServerHasADisruptionBudgetFromTwoReplicas(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(1)))
	statefulSet := waitForStatefulSet(t, g, key)
	pdbID := namespace + "_tei_policy_PodDisruptionBudget"
	g.Eventually(func(g Gomega) {
		g.Expect(inventoryIDs(t, g, key)).To(ContainElement(namespace + "_tei_apps_StatefulSet"))
	}).Should(Succeed())
	g.Expect(inventoryIDs(t, g, key)).NotTo(ContainElement(pdbID))
	g.Expect(isNotFound(t, &policyv1.PodDisruptionBudget{}, key)()).To(BeTrue(), "one replica has no budget")

	server := getServer(t, g, key)
	selector, err := labels.Parse(server.Status.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector.Matches(labels.Set(statefulSet.Spec.Template.Labels))).To(BeTrue(), "status.selector %q selects the pods", server.Status.Selector)
	g.Expect(server.Status.Selector).To(Equal(labels.SelectorFromSet(builder.SelectorLabels(server)).String()), "the Services' selector, which every StatefulSet's pods match")

	updateServer(t, g, key, fixtures.WithReplicas(3))
	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(func() error { return env.Client.Get(t.Context(), key, pdb) }).Should(Succeed())
	g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
	g.Expect(pdb.Spec.MinAvailable).To(BeNil())
	g.Expect(pdb.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: builder.SelectorLabels(server)}))
	g.Expect(metav1.GetControllerOf(pdb)).To(HaveValue(HaveField("UID", server.UID)))
	g.Expect(pdb.Labels).To(HaveKeyWithValue(embedopsv1.NameLabel, "tei"))
	g.Eventually(func(g Gomega) { g.Expect(inventoryIDs(t, g, key)).To(ContainElement(pdbID)) }).Should(Succeed())

	updateServer(t, g, key, withMinAvailable(intstr.FromString("50%")))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), key, pdb)).To(Succeed())
		g.Expect(pdb.Spec.MinAvailable).To(HaveValue(Equal(intstr.FromString("50%"))))
		g.Expect(pdb.Spec.MaxUnavailable).To(BeNil(), "the override replaces the default, not adds to it")
	}).Should(Succeed())

	updateServer(t, g, key, fixtures.WithReplicas(1))
	g.Eventually(isNotFound(t, &policyv1.PodDisruptionBudget{}, key)).Should(BeTrue(), "below two replicas the budget is pruned")
	g.Eventually(func(g Gomega) { g.Expect(inventoryIDs(t, g, key)).NotTo(ContainElement(pdbID)) }).Should(Succeed())
	checkConditions(t, g, key)
}

func TestServerNetworkPolicyFollowsTheSpec(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", withNetworkPolicy()))
	statefulSet := waitForStatefulSet(t, g, key)
	policy := &networkingv1.NetworkPolicy{}
	g.Eventually(func() error { return env.Client.Get(t.Context(), key, policy) }).Should(Succeed())
	podSelector, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(podSelector.Matches(labels.Set(statefulSet.Spec.Template.Labels))).To(BeTrue(), "the policy selects the pods")
	g.Expect(policy.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(policy.Spec.Ingress).To(HaveLen(1))
	g.Expect(policy.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}), "an empty list admits the namespace's pods")
	var ports []string
	for _, p := range policy.Spec.Ingress[0].Ports {
		ports = append(ports, string(*p.Protocol)+"/"+p.Port.String())
	}
	g.Expect(ports).To(Equal([]string{"TCP/8080", "TCP/9000"}))
	g.Expect(metav1.GetControllerOf(policy)).To(HaveValue(HaveField("Name", "tei")))

	gateway := embedopsv1.NetworkPolicyPeer{NamespaceSelector: &embedopsv1.PeerSelector{MatchLabels: map[string]embedopsv1.LabelValue{"kubernetes.io/metadata.name": "gateway"}}}
	updateServer(t, g, key, withNetworkPolicy(gateway))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), key, policy)).To(Succeed())
		g.Expect(policy.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "gateway"}}},
		}))
	}).Should(Succeed())

	updateServer(t, g, key, withoutNetworkPolicy())
	g.Eventually(isNotFound(t, &networkingv1.NetworkPolicy{}, key)).Should(BeTrue(), "the policy goes with the field")
	checkConditions(t, g, key)
}

// gitopsManager applies servers as a GitOps tool would.
const gitopsManager = "gitops"

func TestUnsetReplicasStayUnownedThroughTheControllersApplies(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	manifest := fixtures.EmbeddingServer(namespace, "tei")
	manifest.Spec.Replicas = nil
	manifest.TypeMeta = metav1.TypeMeta{APIVersion: embedopsv1.GroupVersion.String(), Kind: embedopsv1.EmbeddingServerKind}
	apply := func() {
		t.Helper()
		u, err := toUnstructured(manifest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.Client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(gitopsManager), client.ForceOwnership)).To(Succeed())
	}
	apply()
	key := client.ObjectKeyFromObject(manifest)
	waitForStatefulSet(t, g, key)
	g.Eventually(func(g Gomega) { g.Expect(getServer(t, g, key).Status.Selector).NotTo(BeEmpty()) }).Should(Succeed())
	g.Expect(replicasOwners(t, g, key)).To(BeEmpty(), "the schema default is owned by no one, the controller included")

	// An autoscaler scales through the subresource; the GitOps tool applies
	// its manifest again; the autoscaler's count stands.
	server := getServer(t, g, key)
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	g.Expect(env.Client.SubResource("scale").Update(t.Context(), server, client.WithSubResourceBody(scale), client.FieldOwner("autoscaler"))).To(Succeed())
	apply()
	g.Eventually(func(g Gomega) {
		statefulSet := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(t.Context(), key, statefulSet)).To(Succeed())
		g.Expect(statefulSet.Spec.Replicas).To(HaveValue(Equal(int32(3))))
		g.Expect(env.Client.Get(t.Context(), key, &policyv1.PodDisruptionBudget{})).To(Succeed())
	}).Should(Succeed())
	g.Expect(getServer(t, g, key).Spec.Replicas).To(HaveValue(Equal(int32(3))))
	// Neither the GitOps tool nor the controller took the field; whether
	// the scale write is recorded as an owner is the API server's business.
	g.Expect(replicasOwners(t, g, key)).NotTo(ContainElement(BeElementOf(gitopsManager, embedopsv1.FieldManager, embedopsv1.StatusFieldManager)))
}

// replicasOwners are the field managers that own the server's spec.replicas.
func replicasOwners(t *testing.T, g Gomega, key types.NamespacedName) []string {
	t.Helper()
	var owners []string
	for _, entry := range getServer(t, g, key).ManagedFields {
		if entry.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]any `json:"f:spec"`
		}
		g.Expect(json.Unmarshal(entry.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		if _, ok := fields.Spec["f:replicas"]; ok {
			owners = append(owners, entry.Manager)
		}
	}
	return owners
}

// toUnstructured converts a typed object for an apply.
func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
