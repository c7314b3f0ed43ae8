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

// A new server's children are created once, each by one request after one
// uncached ownership read, and never checked again by ssa's GET and dry run
// on the way to Ready; its first reconcile writes the finalizer and its
// status, which is written again once Ready, and the binding gets one status write,
// from its creator. Events are sent asynchronously, so they are not
// counted here.
func TestANewServerIsCreatedWithoutRechecks(t *testing.T) {
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	requests := startManager(t, namespace)
	before := requests.requestSnapshot()
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	made := requests.requestsSince(before)
	t.Logf("requests from create to Ready: %v", made)
	delete(made, "POST events")
	g.Expect(made).To(Equal(map[string]int{
		"PATCH embeddingservers":        1, // the finalizer
		"PATCH embeddingservers/status": 2, // the first reconcile's (Initializing, the selector), then Ready
		"POST modelcachebindings":       1,
		"PUT modelcachebindings/status": 1, // the creator's reference and the first status
		"GET modelcachebindings":        1, // this process's first listing of the namespace's bindings
		"GET statefulsets":              1, // the ownership read (404)
		"GET services":                  3, // the ownership reads (404) and, once per process, the kubernetes Service
		"PATCH statefulsets":            1, // created by one apply
		"PATCH services":                2,
	}), "every request of a new server is listed here; a second ssa pass adds GETs and dry runs")
}
