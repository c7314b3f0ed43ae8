//go:build linux

package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// loadInterval is how often the load pod sends /embed: the 100 ms.
const loadInterval = 100 * time.Millisecond

// loadStatsPort is where the load pod serves its counts.
const loadStatsPort = 8081

// TestStorageChangeUnderLoadFailsNoRequest changes the cache of a
// two-replica server (its size: new claims, so new pods) while a pod sends
// /embed through the server's Service every 100 ms, on a new connection
// each time, the way kube-proxy balances them. The pods move to the new
// storage surge first, so no request fails: the disruption budget would
// allow one replica down, the rollout takes none.
func TestStorageChangeUnderLoadFailsNoRequest(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h := startHub(t, ns, "", hubModel{ID: smallModel})
	server := newServer("rolling", h, func(s *embedopsv1.EmbeddingServer) { s.Spec.Replicas = new(int32(2)) })
	applyObject(t, ns, serverObject(t, server))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	before := serverStatefulSets(t, got)
	g.Expect(before).To(HaveLen(1))

	load := startLoad(t, ns, fmt.Sprintf("http://%s.%s.svc:%d/embed", got.Name, ns, got.Spec.Port))
	g.Eventually(func(g Gomega) {
		g.Expect(load.stats(t).OK).To(BeNumerically(">=", 10), "the load reaches TEI through the Service")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	warmup := load.stats(t)

	began := time.Now()
	server.Spec.Cache.Size = new(resource.MustParse("20Gi"))
	applyObject(t, ns, serverObject(t, server))
	rolled := waitRolledOut(t, client.ObjectKeyFromObject(server))
	after := serverStatefulSets(t, rolled)
	g.Expect(after).To(HaveLen(1))
	g.Expect(after[0].UID).NotTo(Equal(before[0].UID), "the new storage is served by a new StatefulSet")
	took := time.Since(began)
	// A last second of load on the new pods alone.
	end := load.stats(t).Sent + int(time.Second/loadInterval)
	g.Eventually(func(g Gomega) { g.Expect(load.stats(t).Sent).To(BeNumerically(">=", end)) }).WithTimeout(time.Minute).Should(Succeed())
	stats := load.stats(t)
	t.Logf("storage change on real pods: rolled from %s to %s in %s; /embed every %s: %d sent during and after it, %d failed (warm-up: %d sent, %d failed)",
		before[0].Name, after[0].Name, took.Round(time.Second), loadInterval, stats.Sent-warmup.Sent, stats.Failed-warmup.Failed, warmup.Sent, warmup.Failed)
	// Warm-up failures (the Service not programmed yet) are not the change's.
	g.Expect(stats.Failed-warmup.Failed).To(BeZero(), "failures during and after the change: %v", stats.Failures[min(warmup.Failed, len(stats.Failures)):])
}

// loadPod runs `podcheck load` against a URL.
type loadPod struct {
	pod *corev1.Pod
}

// loadStatsReport is podcheck load's /stats (test/node/podcheck/load.go).
type loadStatsReport struct {
	Sent     int      `json:"sent"`
	OK       int      `json:"ok"`
	Failed   int      `json:"failed"`
	Failures []string `json:"failures"`
}

// startLoad starts a pod sending /embed to url every loadInterval and
// waits until it runs.
func startLoad(t *testing.T, ns, url string) *loadPod {
	t.Helper()
	pod := serverPod("load")
	pod.Spec.Containers[0].Args = []string{"load", url, loadInterval.String(), fmt.Sprintf(":%d", loadStatsPort)}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: loadStatsPort}}
	pod.Spec.Containers[0].ReadinessProbe = nil
	_, err := node.Clientset.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &loadPod{pod: waitForPod(t, ns, "load", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" })}
}

// stats reads what the load pod counted, at its address in the node's
// namespace.
func (l *loadPod) stats(t *testing.T) loadStatsReport {
	t.Helper()
	g := NewWithT(t)
	url := "http://" + net.JoinHostPort(l.pod.Status.PodIP, strconv.Itoa(loadStatsPort)) + "/stats"
	client := &http.Client{Transport: &http.Transport{DialContext: node.Dial, Proxy: nil}, Timeout: 10 * time.Second}
	var report loadStatsReport
	g.Eventually(func(g Gomega) {
		resp, err := client.Get(url) //nolint:noctx // bounded by the client's timeout
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		data, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(json.Unmarshal(data, &report)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return report
}

// serverStatefulSets are the StatefulSets of the server.
func serverStatefulSets(t *testing.T, server *embedopsv1.EmbeddingServer) []appsv1.StatefulSet {
	t.Helper()
	var list appsv1.StatefulSetList
	NewWithT(t).Expect(node.Client.List(t.Context(), &list, client.InNamespace(server.Namespace),
		client.MatchingLabels{embedopsv1.NameLabel: server.Name})).To(Succeed())
	return list.Items
}

// waitRolledOut waits until the server's current generation is Ready with
// every replica and its old StatefulSets are gone.
func waitRolledOut(t *testing.T, key client.ObjectKey) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(node.Client.Get(t.Context(), key, server)).To(Succeed())
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
		g.Expect(conditions.IsTrue(server, embedopsv1.ReadyCondition)).To(BeTrue(), func() string { return report(t, server) })
		g.Expect(serverStatefulSets(t, server)).To(HaveLen(1))
	}).WithContext(t.Context()).WithTimeout(serverTimeout).WithPolling(time.Second).Should(Succeed())
	return server
}
