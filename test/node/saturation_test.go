//go:build linux

package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// The saturation test's load: saturationClients clients, each sending its
// next /embed once the last is answered, for saturationLoad, to a stand-in
// whose every batch computes for saturationBatch on its one backend thread.
// A /health then waits behind about saturationClients batches, twice the
// readiness probe's 5 s timeout and a sixth of the liveness probe's 60 s
// (internal/builder).
const (
	saturationClients = 10
	saturationBatch   = time.Second
	saturationLoad    = 2 * time.Minute
	// saturationRequestTimeout bounds one /embed: several times what the
	// queue ahead of it takes.
	saturationRequestTimeout = time.Minute
	// saturationRetryPause spaces a client's requests after a failed one,
	// so that a server that is down is not asked in a busy loop.
	saturationRetryPause = 100 * time.Millisecond
)

// standinBatchCompute is the TEI stand-in's per-batch compute time
// (test/standin/tei, BatchComputeVariable).
const standinBatchCompute = "EMBEDOPS_STANDIN_BATCH_COMPUTE"

// saturationCPU limits the saturated server's container, so that its busy
// backend thread takes a quarter of one of the machine's cores: its batches
// last saturationBatch of wall time all the same.
var saturationCPU = resource.MustParse("250m")

// TestSaturatedServerIsNotRestarted saturates a one-replica server with
// /embed for two minutes, at its pod's address, while the kubelet probes
// it: /health, which waits behind the batches, misses the readiness
// probe's timeout, and the pod leaves the Service for a while; liveness
// asks /health too but waits for the late answer (builder.LivenessProbe),
// so it never fails, the container is never restarted, every request is
// answered, and the server is Ready again once the load ends.
func TestSaturatedServerIsNotRestarted(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h := startHub(t, ns, "", hubModel{ID: smallModel})
	server := newServer("saturated", h, func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Env = append(s.Spec.Env, corev1.EnvVar{Name: standinBatchCompute, Value: saturationBatch.String()})
		s.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: saturationCPU}}
	})
	applyObject(t, ns, serverObject(t, server))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	pods := serverPods(t, got)
	g.Expect(pods).To(HaveLen(1))
	pod := pods[0]

	load := saturate(t, podTEI(&pod, got.Spec.Port, ""))
	probes := probeFailures(t, ns, pod.Name)
	waitServerReady(t, client.ObjectKeyFromObject(server))
	after, err := node.Clientset.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	restarts := teiContainerStatus(after).RestartCount
	t.Logf("saturated for %s by %d clients, %s per batch: %d /embed answered, %d failed; kubelet: %d readiness and %d liveness probe failures, %d restarts",
		saturationLoad, saturationClients, saturationBatch, load.answered, load.failed, probes["Readiness"], probes["Liveness"], restarts)

	g.Expect(probes["Readiness"]).To(BeNumerically(">", 0), "/health missed the readiness probe's timeout: the server was saturated")
	g.Expect(probes["Liveness"]).To(BeZero(), "/health answered later than the liveness probe's timeout")
	g.Expect(restarts).To(BeZero(), "the saturated container was restarted")
	g.Expect(after.UID).To(Equal(pod.UID), "the pod was replaced")
	g.Expect(podReady(after)).To(BeTrue())
	g.Expect(load.failed).To(BeZero(), "failures: %v", load.failures)
	g.Expect(load.answered).To(BeNumerically(">", 0))
}

// saturation is what the load counted.
type saturation struct {
	answered, failed int
	// failures are the first errors, one per failed request.
	failures []string
}

// saturate sends /embed to c from saturationClients clients for
// saturationLoad and waits for the last answers.
func saturate(t *testing.T, c *tei) saturation {
	t.Helper()
	starting, stop := context.WithTimeout(t.Context(), saturationLoad)
	defer stop()
	httpClient := &http.Client{
		Transport: &http.Transport{DialContext: node.Dial, Proxy: nil, MaxIdleConnsPerHost: saturationClients},
		Timeout:   saturationRequestTimeout,
	}
	var mu sync.Mutex
	var total saturation
	var wg sync.WaitGroup
	for i := range saturationClients {
		wg.Go(func() {
			for n := 0; starting.Err() == nil; n++ {
				err := embedOnce(t.Context(), httpClient, c.base, fmt.Sprintf("client %d request %d", i, n))
				mu.Lock()
				if err == nil {
					total.answered++
				} else {
					total.failed++
					if len(total.failures) < 10 {
						total.failures = append(total.failures, err.Error())
					}
				}
				mu.Unlock()
				if err != nil {
					select {
					case <-starting.Done():
					case <-time.After(saturationRetryPause):
					}
				}
			}
		})
	}
	wg.Wait()
	return total
}

// embedOnce POSTs one input to base's /embed and fails unless TEI
// answered 200 (router/src/http/types.rs EmbedRequest).
func embedOnce(ctx context.Context, c *http.Client, base, input string) error {
	body := fmt.Sprintf(`{"inputs": %q}`, input)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/embed", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("/embed answered %d: %s", resp.StatusCode, data)
	}
	return err
}

// probeFailures counts the kubelet's failed probes of pod by probe type
// ("Readiness", "Liveness"), from its Unhealthy events ("<type> probe
// failed: ...", pkg/kubelet/prober/prober.go).
func probeFailures(t *testing.T, ns, pod string) map[string]int {
	t.Helper()
	events, err := node.Clientset.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod + ",reason=Unhealthy",
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	failures := map[string]int{}
	for _, e := range events.Items {
		if probe, _, ok := strings.Cut(e.Message, " probe failed: "); ok {
			failures[probe] += max(int(e.Count), 1)
		}
	}
	return failures
}
