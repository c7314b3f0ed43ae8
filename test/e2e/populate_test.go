package e2e

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// simulatedRealized is what kwok's simulated populate containers report.
var simulatedRealized = &embedopsv1.RealizedCache{
	ResolvedCommit: harness.SimulatedPopulateCommit,
	ContentDigest:  harness.SimulatedPopulateDigest,
	Bytes:          new(int64(1)),
}

func TestPerReplicaPodsPopulateTheirCache(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	server := newServer(namespace, "per-replica", nil)
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())

	server = expectReady(t, client.ObjectKeyFromObject(server), metav1.ConditionTrue, embedopsv1.AvailableReason)
	expectModelDownloaded(t, g, server)
	g.Expect(bindingOf(t, g, server).Status.Realized).To(Equal(simulatedRealized))
}

func TestSharedCacheIsPopulatedByOneJobBeforeItsServersStart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	var servers []*embedopsv1.EmbeddingServer
	for _, name := range []string{"shared-a", "shared-b"} {
		server := fixtures.EmbeddingServer(namespace, name, fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithRetainFor(0))
		g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
		servers = append(servers, server)
	}

	for i, server := range servers {
		servers[i] = expectReady(t, client.ObjectKeyFromObject(server), metav1.ConditionTrue, embedopsv1.AvailableReason)
		expectModelDownloaded(t, g, servers[i])
	}
	binding := bindingOf(t, g, servers[0])
	g.Expect(servers[1].Status.CacheBinding).To(Equal(binding.Name))
	g.Expect(binding.Status.Realized).To(Equal(simulatedRealized))

	var jobs batchv1.JobList
	g.Expect(cluster.Client.List(t.Context(), &jobs, client.InNamespace(namespace))).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "one Job fills the shared claim")
	job := jobs.Items[0]
	g.Expect(job.Name).To(Equal(builder.PopulateJobName(binding.Name)))
	g.Expect(job.Status.Succeeded).To(BeNumerically("==", 1))
	g.Expect(job.Status.CompletionTime).NotTo(BeNil())
	for _, server := range servers {
		var pods corev1.PodList
		g.Expect(cluster.Client.List(t.Context(), &pods, client.InNamespace(namespace),
			client.MatchingLabels{embedopsv1.NameLabel: server.Name})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		for _, pod := range pods.Items {
			g.Expect(pod.CreationTimestamp.Time).NotTo(BeTemporally("<", job.Status.CompletionTime.Time),
				"server pods start after the Job succeeded")
		}
	}
	expectReleasedAfterItsServers(t, g, binding, servers)
}

// expectReleasedAfterItsServers deletes the servers of a binding retained
// for nothing and waits until it is Released and its claims are gone.
// kube-controller-manager's pvc-protection keeps a claim while any
// scheduled pod names it, finished or not: a Shared binding's finished
// populate pod held its claim Terminating until the binding deleted its Job.
func expectReleasedAfterItsServers(t *testing.T, g *WithT, binding *embedopsv1.ModelCacheBinding, servers []*embedopsv1.EmbeddingServer) {
	t.Helper()
	for _, server := range servers {
		g.Expect(cluster.Client.Delete(t.Context(), server)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		released := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(binding), released)).To(Succeed())
		g.Expect(released.Status.Phase).To(Equal(embedopsv1.BindingReleased),
			"Ready: %s", conditions.GetMessage(released, embedopsv1.ReadyCondition))
		for _, name := range released.Spec.Resources.PersistentVolumeClaimNames {
			err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: binding.Namespace, Name: name}, &corev1.PersistentVolumeClaim{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim %s: %v", name, err)
		}
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
}

// expectModelDownloaded waits for ModelReady=True Downloaded with the
// simulated commit.
func expectModelDownloaded(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		current := &embedopsv1.EmbeddingServer{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(server), current)).To(Succeed())
		g.Expect(conditions.IsTrue(current, embedopsv1.ModelReadyCondition)).To(BeTrue(),
			"ModelReady: %s", conditions.GetMessage(current, embedopsv1.ModelReadyCondition))
		g.Expect(conditions.GetReason(current, embedopsv1.ModelReadyCondition)).To(Equal(embedopsv1.DownloadedReason))
		g.Expect(conditions.GetMessage(current, embedopsv1.ModelReadyCondition)).To(ContainSubstring(harness.SimulatedPopulateCommit))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
}

// bindingOf reads the server's binding once the server names it.
func bindingOf(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := &embedopsv1.ModelCacheBinding{}
	g.Eventually(func(g Gomega) {
		current := &embedopsv1.EmbeddingServer{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(server), current)).To(Succeed())
		g.Expect(current.Status.CacheBinding).NotTo(BeEmpty())
		key := client.ObjectKey{Namespace: current.Namespace, Name: current.Status.CacheBinding}
		g.Expect(cluster.Client.Get(t.Context(), key, binding)).To(Succeed())
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
	return binding
}
