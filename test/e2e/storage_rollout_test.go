package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/rollout"
)

// TestStorageChangesKeepTwoOfThreeReplicasServing runs a 3-replica
// PerReplica server through every change of its cache decision and counts
// its Service's ready endpoints four times a second: never fewer than 2.
func TestStorageChangesKeepTwoOfThreeReplicasServing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	other := createStorageClass(t, g, namespace+"-other")
	server := fixtures.EmbeddingServer(namespace, "rolling", fixtures.WithReplicas(3), fixtures.WithRetainFor(time.Hour))
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	key := client.ObjectKeyFromObject(server)
	expectReady(t, key, metav1.ConditionTrue, embedopsv1.AvailableReason)

	results, err := rollout.Run(t.Context(), cluster.Client, cluster.Clientset, key, rollout.Changes(2*time.Hour, other), settle)
	for _, r := range results {
		t.Logf("%-13s fewest ready endpoints %d of %d (%d samples), done in %.1fs, StatefulSet %s -> %s",
			r.Change, r.FewestReady, r.Replicas, r.Samples, r.Seconds, r.From, r.To)
	}
	g.Expect(err).NotTo(HaveOccurred())
	expectBudgetComputedThroughout(t, g, namespace)
	changes := rollout.Changes(2*time.Hour, other)
	g.Expect(results).To(HaveLen(len(changes)))
	for i, r := range results {
		g.Expect(r.FewestReady).To(BeNumerically(">=", 2), "%s: the Service's ready endpoints dropped below 2", r.Change)
		switch {
		case changes[i].Rolls:
			g.Expect(r.ToUID).NotTo(Equal(r.FromUID), "%s needs new storage: the pods move to a new StatefulSet", r.Change)
		case changes[i].Restarts:
			// Its pods would be replaced in place; kwok's simulated
			// populator resolves every revision to one commit
			// (harness.SimulatedPopulateCommit), so TEI's --revision and the
			// pod template stay the same here. envtest checks the rolling
			// update (TestRevisionChangeRollsThePodsOnTheirOwnClaims).
			g.Expect(r.ToUID).To(Equal(r.FromUID), "%s keeps the claims: the StatefulSet stays", r.Change)
		default:
			g.Expect(r.ToUID).To(Equal(r.FromUID), "%s moves no data: the StatefulSet stays", r.Change)
			g.Expect(r.ToGeneration).To(Equal(r.FromGeneration), "%s restarts no pod", r.Change)
		}
	}
}

// createStorageClass makes a StorageClass of the local cluster's
// provisioner, deleted when the test ends.
func createStorageClass(t *testing.T, g *WithT, name string) string {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          harness.ProvisionerName,
		ReclaimPolicy:        new(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    new(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: new(true),
	}
	g.Expect(cluster.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), class) })
	return name
}

// expectBudgetComputedThroughout checks that kube-controller-manager's
// disruption controller could compute the server's budget through every
// change: each pod's StatefulSet existed while the pod did, so it never
// reported CalculateExpectedPodCountFailed, whose failSafe holds
// disruptionsAllowed at 0 and refuses every drain and eviction (kubernetes
// v1.37.2 pkg/controller/disruption/disruption.go). Once the changes are
// done, the budget allows one disruption of the three ready replicas.
func expectBudgetComputedThroughout(t *testing.T, g *WithT, namespace string) {
	t.Helper()
	var events corev1.EventList
	g.Expect(cluster.Client.List(t.Context(), &events, client.InNamespace(namespace))).To(Succeed())
	for _, event := range events.Items {
		g.Expect(event.Reason).NotTo(Equal("CalculateExpectedPodCountFailed"), "%s %s: %s", event.InvolvedObject.Kind, event.InvolvedObject.Name, event.Message)
	}
	var budgets policyv1.PodDisruptionBudgetList
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.Client.List(t.Context(), &budgets, client.InNamespace(namespace))).To(Succeed())
		g.Expect(budgets.Items).To(HaveLen(1))
		g.Expect(budgets.Items[0].Status.DisruptionsAllowed).To(BeNumerically(">=", 1), "%+v", budgets.Items[0].Status)
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
}
