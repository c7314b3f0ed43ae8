package controller

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// A reconcile request to a Ready server whose children and bindings are as
// it last left them reads everything from the cache and writes only the
// acknowledgement; the Released records of the namespace change nothing.
func TestASteadyReconcileMakesOnlyTheAcknowledgement(t *testing.T) {
	for _, released := range []int{0, 200} {
		t.Run(fmt.Sprintf("%d Released records", released), func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			namespace := harness.Namespace(t, env.Client)
			g.Expect(fixtures.CreateReleasedRecords(t.Context(), env.Client, namespace, released)).To(Succeed())
			requests := startManager(t, namespace)
			key := readyServer(t, g, namespace, fixtures.WithReplicas(2))

			for round := range 3 {
				before := requests.requestSnapshot()
				requestReconcile(t, g, key)
				made := requests.requestsSince(before)
				t.Logf("round %d: %v", round, made)
				g.Expect(made).To(Equal(map[string]int{"PATCH embeddingservers/status": 1}),
					"a steady reconcile made requests beyond its acknowledgement")
			}
			checkConditions(t, g, key)
		})
	}
}

// Once the reconcile skips the children's checks, an edit of a child, or
// its deletion, still brings the full check back.
func TestChildrenChangedAtRestAreSetBack(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := readyServer(t, g, namespace, fixtures.WithReplicas(2))

	service := &corev1.Service{}
	g.Expect(env.Client.Get(t.Context(), key, service)).To(Succeed())
	edit := client.MergeFrom(service.DeepCopy())
	service.Spec.Ports[0].Port = 9999
	g.Expect(env.Client.Patch(t.Context(), service, edit, client.FieldOwner("kubectl-edit"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(t.Context(), key, service)).To(Succeed())
		g.Expect(service.Spec.Ports[0].Port).To(Equal(int32(8080)))
	}).Should(Succeed())

	budget := &metav1.PartialObjectMetadata{}
	budget.SetGroupVersionKind(policyBudgetKind)
	g.Expect(env.Client.Get(t.Context(), key, budget)).To(Succeed())
	g.Expect(env.Client.Delete(t.Context(), budget)).To(Succeed())
	g.Eventually(func(g Gomega) {
		recreated := &metav1.PartialObjectMetadata{}
		recreated.SetGroupVersionKind(policyBudgetKind)
		g.Expect(env.Client.Get(t.Context(), key, recreated)).To(Succeed())
		g.Expect(recreated.UID).NotTo(Equal(budget.UID))
	}).Should(Succeed())
	checkConditions(t, g, key)
}

// policyBudgetKind is the PodDisruptionBudget's kind.
var policyBudgetKind = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")

// readyServer creates a server, marks its StatefulSet ready, waits until
// it is Ready and has it reconciled once more, so that its children and
// bindings are as it leaves them.
func readyServer(t *testing.T, g *WithT, namespace string, options ...fixtures.Option) types.NamespacedName {
	t.Helper()
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", options...))
	waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	requestReconcile(t, g, key)
	return key
}

// The benchmark adds Released records to a namespace the controller already
// reconciles, which makes each new record Active first.
func TestReleasedRecordsCanBeAddedUnderARunningController(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	g.Expect(fixtures.CreateReleasedRecords(t.Context(), env.Client, namespace, 20)).To(Succeed())
	var bindings embedopsv1.ModelCacheBindingList
	g.Expect(env.Client.List(t.Context(), &bindings, client.InNamespace(namespace))).To(Succeed())
	g.Expect(bindings.Items).To(HaveLen(20))
	for _, binding := range bindings.Items {
		g.Expect(binding.Status.Phase).To(Equal(embedopsv1.BindingReleased), "binding %s", binding.Name)
	}
}
