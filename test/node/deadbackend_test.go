//go:build linux

package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/harness"
)

// standinBackendDiesAt kills the TEI stand-in's backend at that /embed
// batch (test/standin/tei, BackendDiesAtVariable).
const standinBackendDiesAt = "EMBEDOPS_STANDIN_BACKEND_DIES_AT_BATCH"

// livenessKillMessage is what the kubelet's Killing event says of a
// container it restarts for its liveness probe (kubernetes v1.37.2
// pkg/kubelet/kuberuntime/kuberuntime_manager.go, computePodActions).
const livenessKillMessage = "failed liveness probe, will be restarted"

// eventWait bounds the wait for an event the kubelet recorded before the
// status the test saw: its recorder sends events apart from the status.
const eventWait = 30 * time.Second

// TestDeadBackendIsRestarted kills a Ready server's backend with its first
// /embed, as a CUDA error kills TEI's: the router keeps its port and
// answers /health with 503. The kubelet's liveness probe
// (builder.LivenessProbe) restarts the container within
// builder.DeadBackendRestartBound, the wait's limit, in the same pod; the
// new container serves again.
func TestDeadBackendIsRestarted(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h := startHub(t, ns, "", hubModel{ID: smallModel})
	server := newServer("dead-backend", h, func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Env = append(s.Spec.Env, corev1.EnvVar{Name: standinBackendDiesAt, Value: "1"})
	})
	applyObject(t, ns, serverObject(t, server))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	pods := serverPods(t, got)
	g.Expect(pods).To(HaveLen(1))
	pod := pods[0]
	g.Expect(teiContainerStatus(&pod).RestartCount).To(BeZero())
	c := podTEI(&pod, got.Spec.Port, "")

	g.Expect(embedOnce(t.Context(), c.client, c.base, "the batch the backend dies in")).To(MatchError(ContainSubstring("answered 424")))
	died := time.Now()
	g.Expect(statusOf(t, c, "/health")).To(Equal(http.StatusServiceUnavailable), "the dead backend's /health")
	g.Expect(statusOf(t, c, "/info")).To(Equal(http.StatusOK), "the port stays open")

	var restarted *corev1.Pod
	g.Eventually(func(g Gomega) {
		current, err := node.Clientset.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(teiContainerStatus(current).RestartCount).To(BeNumerically(">=", 1))
		restarted = current
	}).WithContext(t.Context()).WithTimeout(builder.DeadBackendRestartBound).WithPolling(time.Second).Should(Succeed(),
		"the container was not restarted within %s of its backend's death", builder.DeadBackendRestartBound)
	t.Logf("restarted %s after the backend died (bound %s)", time.Since(died).Round(time.Second), builder.DeadBackendRestartBound)
	g.Expect(restarted.UID).To(Equal(pod.UID), "the container restarts in its pod")
	g.Expect(teiContainerStatus(restarted).LastTerminationState.Terminated).NotTo(BeNil())
	g.Eventually(func() []string { return killings(t, ns, pod.Name) }).WithContext(t.Context()).WithTimeout(eventWait).
		Should(ContainElement(ContainSubstring(livenessKillMessage)), "the kubelet killed it for its liveness probe")

	got = waitServerReady(t, client.ObjectKeyFromObject(server))
	after, err := node.Clientset.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	// The restarted container runs with the same environment, so its
	// backend would die again at its first batch: its /health says it is
	// alive until then.
	g.Expect(statusOf(t, podTEI(after, got.Spec.Port, ""), "/health")).To(Equal(http.StatusOK), "the restarted backend's /health")
}

// statusOf GETs path from c and returns the status.
func statusOf(t *testing.T, c *tei, path string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.base+path, nil)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	resp, err := c.client.Do(req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "GET %s%s", c.base, path)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// killings are the messages of the kubelet's Killing events of pod.
func killings(t *testing.T, ns, pod string) []string {
	t.Helper()
	events, err := node.Clientset.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod + ",reason=Killing",
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var messages []string
	for _, e := range events.Items {
		messages = append(messages, strings.TrimSpace(e.Message))
	}
	return messages
}
