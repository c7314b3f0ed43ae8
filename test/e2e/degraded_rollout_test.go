package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/rollout"
)

// Two replicas replaced in place (maxSurge 0), ordinal 0 down (a dead
// backend keeps its pod Running and unready), ordinal 1 serving: a storage
// change never leaves the Service without a ready endpoint. The down pod
// goes first (spec.ordinals.start rises past it); the serving one only
// once its successor is ready. Scaling the old StatefulSet from 2 to 1
// would have removed ordinal 1, the only one serving.
func TestAStorageChangeReplacesTheDownReplicaFirst(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	other := createStorageClass(t, g, namespace+"-other")
	key := createDegradedServer(t, g, namespace, "degraded", 2, 0)

	results, err := rollout.Run(t.Context(), cluster.Client, cluster.Clientset, key, []rollout.Change{{
		Name: "storage class", Apply: func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.StorageClassName = other }, Rolls: true,
	}}, settle)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(results).To(HaveLen(1))
	t.Logf("fewest ready endpoints %d of %d (%d samples), done in %.1fs", results[0].FewestReady, results[0].Replicas, results[0].Samples, results[0].Seconds)
	g.Expect(results[0].FewestReady).To(BeNumerically(">=", 1), "the serving replica was taken before its successor was ready")
	g.Expect(results[0].ToUID).NotTo(Equal(results[0].FromUID))
}

// Three replicas in place, ordinal 1 down between two serving ones: a
// StatefulSet cannot remove it first, and taking a ready pod would leave
// one ready of the two the budget keeps. The change waits and says so on
// Ready and in a Warning event naming the pod, taking nothing; once
// someone deletes the down pod and it comes back ready, the change
// finishes.
func TestAStorageChangeWaitsOnADownReplicaBetweenReadyOnes(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	other := createStorageClass(t, g, namespace+"-other")
	key := createDegradedServer(t, g, namespace, "held", 3, 1)
	serving := podUIDs(t, g, namespace, "held-0", "held-2")

	update(t, key, func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.StorageClassName = other })
	server := expectReady(t, key, metav1.ConditionFalse, embedopsv1.RolloutWaitingForUnreadyReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring("pod held-1 (not ready)"))
	g.Expect(server.Status.Phase).To(Equal(embedopsv1.PhaseDegraded))
	g.Eventually(func(g Gomega) {
		var events corev1.EventList
		g.Expect(cluster.Client.List(t.Context(), &events, client.InNamespace(namespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", embedopsv1.RolloutWaitingForUnreadyReason), HaveField("Type", corev1.EventTypeWarning),
			HaveField("Message", ContainSubstring("pod held-1")))))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
	g.Expect(podUIDs(t, g, namespace, "held-0", "held-2")).To(Equal(serving), "a serving pod was taken while the change waits")

	g.Expect(cluster.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "held-1"}})).To(Succeed())
	expectRolledOnto(t, g, key, other)
}

// createDegradedServer creates a PerReplica server of replicas pods
// replaced in place, waits until it is Available, then takes the pod of
// ordinal down down and waits until the server counts it unready.
func createDegradedServer(t *testing.T, g *WithT, namespace, name string, replicas int32, down int) types.NamespacedName {
	t.Helper()
	server := fixtures.EmbeddingServer(namespace, name, fixtures.WithReplicas(replicas), fixtures.WithMaxSurge(intstr.FromInt32(0)))
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	key := client.ObjectKeyFromObject(server)
	expectReady(t, key, metav1.ConditionTrue, embedopsv1.AvailableReason)
	takeDown(t, g, types.NamespacedName{Namespace: namespace, Name: name + "-" + strconv.Itoa(down)})
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), key, server)).To(Succeed())
		g.Expect(server.Status.ReadyReplicas).To(Equal(replicas - 1))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
	return key
}

// takeDown plays the kubelet of a pod whose TEI backend died: the pod
// stays Running, its readiness probe fails, so its Ready and
// ContainersReady conditions turn False (kubernetes v1.37.2
// pkg/kubelet/status/generate.go). kwok's stages act on Pending pods only,
// so none makes it ready again; a pod made anew by its StatefulSet is.
func takeDown(t *testing.T, g *WithT, key types.NamespacedName) {
	t.Helper()
	pod := &corev1.Pod{}
	g.Expect(cluster.Client.Get(t.Context(), key, pod)).To(Succeed())
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady || pod.Status.Conditions[i].Type == corev1.ContainersReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
			pod.Status.Conditions[i].Reason = "ContainersNotReady"
			pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].Ready = false
	}
	g.Expect(cluster.Client.Status().Update(t.Context(), pod)).To(Succeed())
}

// podUIDs are the UIDs of the named pods of namespace.
func podUIDs(t *testing.T, g *WithT, namespace string, names ...string) []types.UID {
	t.Helper()
	uids := make([]types.UID, 0, len(names))
	for _, name := range names {
		pod := &corev1.Pod{}
		g.Expect(cluster.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, pod)).To(Succeed())
		uids = append(uids, pod.UID)
	}
	return uids
}

// expectRolledOnto waits until the server is Available on one StatefulSet
// whose claims are of class.
func expectRolledOnto(t *testing.T, g *WithT, key types.NamespacedName, class string) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		server := &embedopsv1.EmbeddingServer{}
		g.Expect(cluster.Client.Get(t.Context(), key, server)).To(Succeed())
		g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.AvailableReason))
		var claims corev1.PersistentVolumeClaimList
		g.Expect(cluster.Client.List(t.Context(), &claims, client.InNamespace(key.Namespace))).To(Succeed())
		classes := map[string]bool{}
		for _, claim := range claims.Items {
			if claim.DeletionTimestamp.IsZero() && claim.Spec.StorageClassName != nil {
				classes[*claim.Spec.StorageClassName] = true
			}
		}
		g.Expect(classes).To(HaveKey(class))
		g.Expect(server.Status.ReadyReplicas).To(Equal(server.GetReplicas()))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
}
