package security

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

// Pod Security admission labels of a namespace.
const (
	enforceLabel        = "pod-security.kubernetes.io/enforce"
	enforceVersionLabel = "pod-security.kubernetes.io/enforce-version"
	restricted          = "restricted"
)

// failedCreateReason is the event reason of a workload controller whose pod
// was refused.
const failedCreateReason = "FailedCreate"

func TestEveryPodIsAdmittedUnderTheRestrictedStandard(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := restrictedNamespace(t)
	servers := []*embedopsv1.EmbeddingServer{
		fixtures.EmbeddingServer(namespace, "per-replica", fixtures.WithCacheMode(embedopsv1.CacheModePerReplica), fixtures.WithReplicas(2)),
		fixtures.EmbeddingServer(namespace, "shared", fixtures.WithCacheMode(embedopsv1.CacheModeShared)),
		fixtures.EmbeddingServer(namespace, "no-cache", fixtures.WithCacheMode(embedopsv1.CacheModeNone)),
	}
	for _, server := range servers {
		g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	}
	for _, server := range servers {
		expectReady(t, server)
		expectPods(t, g, server)
	}
	expectPopulateInitContainers(t, g, servers[0])
	expectJobsSucceeded(t, g, namespace)
	var events corev1.EventList
	g.Expect(cluster.Client.List(t.Context(), &events, client.InNamespace(namespace))).To(Succeed())
	for _, event := range events.Items {
		g.Expect(event.Reason).NotTo(Equal(failedCreateReason), "%s %s: %s", event.InvolvedObject.Kind, event.InvolvedObject.Name, event.Message)
	}
}

// restrictedNamespace is a test namespace that enforces the restricted
// standard, checked by having a pod that breaks it refused.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	ns := &corev1.Namespace{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Name: namespace}, ns)).To(Succeed())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[enforceLabel], ns.Labels[enforceVersionLabel] = restricted, "latest"
	g.Expect(cluster.Client.Update(t.Context(), ns)).To(Succeed())

	g.Eventually(func(g Gomega) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "unrestricted-", Namespace: namespace},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "root", Image: "placeholder:1"}}},
		}
		err := cluster.Client.Create(t.Context(), pod)
		if err == nil {
			_ = cluster.Client.Delete(t.Context(), pod)
		}
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a pod breaking the restricted standard was not refused: %v", err)
		g.Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	return namespace
}

// expectPods checks that the server runs its desired number of pods.
func expectPods(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) {
	t.Helper()
	var pods corev1.PodList
	g.Expect(cluster.Client.List(t.Context(), &pods, client.InNamespace(server.Namespace),
		client.MatchingLabels{embedopsv1.NameLabel: server.Name})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(int(server.GetReplicas())), "pods of %s", server.Name)
}

// expectPopulateInitContainers checks that the server's pods were admitted
// with the populate init container the test means to cover.
func expectPopulateInitContainers(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) {
	t.Helper()
	var pods corev1.PodList
	g.Expect(cluster.Client.List(t.Context(), &pods, client.InNamespace(server.Namespace),
		client.MatchingLabels{embedopsv1.NameLabel: server.Name})).To(Succeed())
	for _, pod := range pods.Items {
		g.Expect(pod.Spec.InitContainers).To(ContainElement(HaveField("Name", builder.PopulateContainerName)), "pod %s", pod.Name)
	}
}

// expectJobsSucceeded checks that the Shared cache's populate Job ran: its
// pod was admitted.
func expectJobsSucceeded(t *testing.T, g *WithT, namespace string) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(cluster.Client.List(t.Context(), &jobs, client.InNamespace(namespace))).To(Succeed())
		g.Expect(jobs.Items).NotTo(BeEmpty(), "the Shared cache has no populate Job")
		for _, job := range jobs.Items {
			g.Expect(job.Status.Succeeded).To(BeNumerically(">=", 1), "Job %s", job.Name)
		}
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
}
