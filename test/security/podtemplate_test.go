package security

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

// Pod template patches the API server admits (it cannot see into
// spec.podTemplate) and the controller refuses.
const (
	hostPathPatch   = `{"spec":{"volumes":[{"name":"root","hostPath":{"path":"/"}}],"containers":[{"name":"embedding","volumeMounts":[{"name":"root","mountPath":"/host"}]}]}}`
	privilegedPatch = `{"spec":{"containers":[{"name":"embedding","securityContext":{"privileged":true}}]}}`
)

// stallWindow is how long a refused server is watched for a StatefulSet.
const stallWindow = 5 * time.Second

func TestPodTemplateReachingTheHostIsNeverRun(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	server := fixtures.EmbeddingServer(namespace, "host-path", fixtures.WithPodTemplate(hostPathPatch))
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed(), "the API server refuses the patch itself: CEL can see into spec.podTemplate now")

	expectRefused(t, g, server, `hostPath volume "root"`)
	g.Consistently(func() bool {
		err := cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(server), &appsv1.StatefulSet{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(stallWindow).WithPolling(time.Second).Should(BeTrue(), "a StatefulSet was created for a refused pod template")
}

func TestPodTemplateTurnedPrivilegedLeavesTheRunningPodsAlone(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	server := fixtures.EmbeddingServer(namespace, "escalates")
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	server = expectReady(t, server)

	g.Eventually(func() error {
		current := &embedopsv1.EmbeddingServer{}
		if err := cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(server), current); err != nil {
			return err
		}
		fixtures.WithPodTemplate(privilegedPatch)(current)
		return cluster.Client.Update(t.Context(), current)
	}).WithTimeout(settle).Should(Succeed())
	expectRefused(t, g, server, `container "embedding" may not run with privileged`)

	statefulSet := &appsv1.StatefulSet{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(server), statefulSet)).To(Succeed())
	for _, c := range statefulSet.Spec.Template.Spec.Containers {
		if c.Name == builder.ContainerName {
			g.Expect(c.SecurityContext.Privileged).To(BeNil(), "the refused patch reached the StatefulSet")
		}
	}
}

// expectRefused waits until the server stalls as ConfigurationInvalid
// naming the problem, with a Warning event saying the same.
func expectRefused(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer, problem string) {
	t.Helper()
	key := client.ObjectKeyFromObject(server)
	stalled := expectCondition(t, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.ConfigurationInvalidReason)
	g.Expect(conditions.GetMessage(stalled, embedopsv1.StalledCondition)).To(ContainSubstring(problem))
	g.Eventually(func(g Gomega) {
		var events corev1.EventList
		g.Expect(cluster.Client.List(t.Context(), &events, client.InNamespace(server.Namespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(SatisfyAll(
			HaveField("InvolvedObject.Name", server.Name),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Reason", embedopsv1.ConfigurationInvalidReason),
		)))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
}
