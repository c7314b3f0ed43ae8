//go:build linux

package node

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// The seed benchmark's model and hub (issue 47): weights of tens of MiB
// served at a bounded rate, so that a download costs time and hub bytes a
// copy does not.
const (
	// seedWeights is the model's one large file: the ONNX weights, which
	// the cpu image's first backend (ORT) loads, so the populator
	// downloads it and none of the repository's other weights
	// (internal/populate select.go).
	seedWeights = "onnx/model.onnx"
	// seedReplicas is what the server scales to from one replica.
	seedReplicas = 3
)

var (
	// seedWeightsMiB is the size of seedWeights.
	seedWeightsMiB = flag.Int("seed.weights-mib", 32, "BenchmarkScaleUpFillsNewReplicas: the size of the model's weights, in MiB.")
	// seedHubRateMiB bounds each of the hub's file responses
	// (test/standin/hub -rate-bytes-per-second).
	seedHubRateMiB = flag.Int("seed.hub-mib-per-second", 16, "BenchmarkScaleUpFillsNewReplicas: the hub's rate per file response, in MiB per second.")
)

// seedMethods are measured in this order: the controller copies by Clone,
// Download is the reference, and Snapshot (issue 47) comes last.
var seedMethods = []embedopsv1.CacheSeed{embedopsv1.CacheSeedClone, embedopsv1.CacheSeedDownload, embedopsv1.CacheSeedSnapshot}

// replicaStart is one measured replica start.
type replicaStart struct {
	seed embedopsv1.CacheSeed
	pod  string
	// kind is seedFirst, seedNew or seedCached.
	kind string
	// ready is how long the replica took to be Ready: from the apply for
	// the first, from the scale for a new one, from the replacement pod's
	// creation for a cached one.
	ready time.Duration
	// fromDelete is, for a cached replica, the time from deleting the pod
	// it replaces to Ready: ready plus the old pod's termination.
	fromDelete time.Duration
	// hubBytes are the file bytes the hub sent to the pod's address
	// while it started.
	hubBytes int64
	// source is the claim's dataSourceRef, "Kind/name", or "-".
	source string
	// copiedFrom is the populator's CopiedFrom: the pod whose cache it
	// checked as a copy; "-" when it did not.
	copiedFrom string
	// populate is how long the populate init container ran, in the whole
	// seconds of its container status.
	populate time.Duration
}

// Kinds of replica start.
const (
	// seedFirst is the server's first replica, downloading into an empty
	// claim.
	seedFirst = "first"
	// seedNew is a replica the scale from 1 to seedReplicas added.
	seedNew = "new"
	// seedCached replaces a deleted pod, its claim already populated: the
	// baseline a copied replica is compared with.
	seedCached = "cached"
)

// BenchmarkScaleUpFillsNewReplicas measures, on the real node and in one
// run, how a PerReplica server's new replicas get the model with each
// spec.cache.seed (issue 47): a one-replica server of -seed.weights-mib
// MiB of weights from a hub sending -seed.hub-mib-per-second MiB per
// second per file response is scaled to seedReplicas, and each new
// replica's time from the scale to Ready and the file bytes the hub sent
// to its address are recorded. The baseline is a replica whose cache is already there: the
// first pod is deleted and its replacement timed from its creation to
// Ready. The goal: a copied replica takes 0 hub bytes and is Ready within
// 1.2x the baseline. It prints a table and reports, per method, the mean
// seconds to Ready of a new replica (s/new-replica), of the baseline
// (s/cached-replica), their ratio (new/cached) and the mean hub bytes of a
// new replica (hub-B/new-replica). Run it alone (make bench-node): other
// tests on the node's 2 cores would slow what it times.
func BenchmarkScaleUpFillsNewReplicas(b *testing.B) {
	if node == nil {
		b.Skip(skipReason)
	}
	// Sub-benchmarks run one after another: rows needs no lock.
	var rows []replicaStart
	record := func(r replicaStart) { rows = append(rows, r) }
	for _, seed := range seedMethods {
		b.Run(string(seed), func(b *testing.B) {
			for range b.N {
				reportSeed(b, measureSeed(b, seed, record))
			}
		})
	}
	// On stdout: a parent benchmark's log is printed only with -v.
	fmt.Print(seedTable(rows))
}

// measureSeed runs one scale-up with seed in a namespace of its own,
// recording each replica start as it is measured, and returns them.
func measureSeed(b *testing.B, seed embedopsv1.CacheSeed, record func(replicaStart)) []replicaStart {
	b.Helper()
	g := NewWithT(b)
	var starts []replicaStart
	add := func(r replicaStart) {
		r.seed = seed
		starts = append(starts, r)
		record(r)
	}
	ns := harness.Namespace(b, node.Client)
	h := startRatedHub(b, ns, *seedHubRateMiB<<20, hubModel{ID: smallModel, Files: []hubFile{{Name: seedWeights, Size: *seedWeightsMiB << 20, LFS: true}}})
	clock := watchPods(b, ns)
	server := newServer("seed-"+strings.ToLower(string(seed)), h, func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.Mode = embedopsv1.CacheModePerReplica
		s.Spec.Cache.Seed = seed
		s.Spec.Replicas = new(int32(1))
	})
	key := client.ObjectKeyFromObject(server)

	applied := time.Now()
	applyObject(b, ns, serverObject(b, server))
	got := waitServerReady(b, key)
	pods := serverPods(b, got)
	g.Expect(pods).To(HaveLen(1))
	first := pods[0]
	add(replicaStarted(b, h, clock, &first, seedFirst, applied, nil))

	before := h.servedBytes(b)
	server.Spec.Replicas = new(int32(seedReplicas))
	scaled := time.Now()
	applyObject(b, ns, serverObject(b, server))
	got = waitServerReady(b, key)
	pods = serverPods(b, got)
	g.Expect(pods).To(HaveLen(seedReplicas))
	for i := range pods {
		if pods[i].UID != first.UID {
			add(replicaStarted(b, h, clock, &pods[i], seedNew, scaled, before))
		}
	}

	before = h.servedBytes(b)
	deleted := time.Now()
	g.Expect(node.Client.Delete(b.Context(), &first)).To(Succeed())
	replacement := waitForPod(b, ns, first.Name, func(p *corev1.Pod) bool { return p.UID != first.UID && podReady(p) })
	created := clock.seenAt(b, replacement.UID)
	cached := replicaStarted(b, h, clock, replacement, seedCached, created, before)
	cached.fromDelete = clock.readyAt(b, replacement.UID).Sub(deleted)
	add(cached)

	stopServer(b, got)
	return starts
}

// replicaStarted measures pod, Ready, as a replica start of kind from
// since, with the hub bytes sent to its address since the counts before
// (all of them when before is nil).
func replicaStarted(b *testing.B, h *hub, clock *podClock, pod *corev1.Pod, kind string, since time.Time, before map[string]int64) replicaStart {
	b.Helper()
	start := replicaStart{pod: pod.Name, kind: kind, ready: clock.readyAt(b, pod.UID).Sub(since), source: "-", copiedFrom: "-"}
	start.hubBytes = h.servedBytes(b)[pod.Status.PodIP] - before[pod.Status.PodIP]
	if claims := claimsOf(pod); len(claims) == 1 {
		claim := &corev1.PersistentVolumeClaim{}
		NewWithT(b).Expect(node.Client.Get(b.Context(), client.ObjectKey{Namespace: pod.Namespace, Name: claims[0]}, claim)).To(Succeed())
		if ref := claim.Spec.DataSourceRef; ref != nil {
			start.source = ref.Kind + "/" + ref.Name
		}
	}
	if from := populateResultOf(b, pod).CopiedFrom; from != "" {
		start.copiedFrom = from
	}
	if ran := pod.Status.InitContainerStatuses[0].State.Terminated; ran != nil {
		start.populate = ran.FinishedAt.Sub(ran.StartedAt.Time)
	}
	return start
}

// reportSeed reports one method's key figures.
func reportSeed(b *testing.B, starts []replicaStart) {
	var newReady, cachedReady time.Duration
	var newBytes int64
	var n, cached int
	for _, s := range starts {
		switch s.kind {
		case seedNew:
			newReady += s.ready
			newBytes += s.hubBytes
			n++
		case seedCached:
			cachedReady += s.ready
			cached++
		}
	}
	if n == 0 || cached == 0 {
		return
	}
	perNew := newReady.Seconds() / float64(n)
	perCached := cachedReady.Seconds() / float64(cached)
	b.ReportMetric(perNew, "s/new-replica")
	b.ReportMetric(perCached, "s/cached-replica")
	b.ReportMetric(perNew/perCached, "new/cached")
	b.ReportMetric(float64(newBytes)/float64(n), "hub-B/new-replica")
}

// seedTable formats the replica starts as a table.
func seedTable(starts []replicaStart) string {
	var out strings.Builder
	fmt.Fprintf(&out, "seed benchmark: weights %d MiB, hub %d MiB/s per file response, scale 1 -> %d\n", *seedWeightsMiB, *seedHubRateMiB, seedReplicas)
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "seed\tpod\treplica\ts to Ready\tfrom\thub bytes\tpopulate s\tclaim source\tcopied from")
	for _, s := range starts {
		from := map[string]string{seedFirst: "apply", seedNew: "scale", seedCached: "pod created"}[s.kind]
		if s.kind == seedCached {
			from += fmt.Sprintf(" (%.1f s from delete)", s.fromDelete.Seconds())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%.1f\t%s\t%d\t%.0f\t%s\t%s\n", s.seed, s.pod, s.kind, s.ready.Seconds(), from, s.hubBytes, s.populate.Seconds(), s.source, s.copiedFrom)
	}
	_ = w.Flush()
	return out.String()
}

// stopServer deletes the server and waits until its pods are gone, so
// that the next method's replicas start on an idle node.
func stopServer(b *testing.B, server *embedopsv1.EmbeddingServer) {
	b.Helper()
	g := NewWithT(b)
	g.Expect(node.Client.Delete(b.Context(), server)).To(Succeed())
	g.Eventually(func() []corev1.Pod { return serverPods(b, server) }).
		WithContext(b.Context()).WithTimeout(podTimeout).WithPolling(time.Second).Should(BeEmpty())
}

// servedBytes are the file bytes the hub sent so far, by client IP
// (test/standin/hub's /_standin/bytes), asked at its pod's address.
func (h *hub) servedBytes(t testing.TB) map[string]int64 {
	t.Helper()
	g := NewWithT(t)
	pod, err := node.Clientset.CoreV1().Pods(h.ns).Get(t.Context(), hubName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("http://%s/_standin/bytes", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(hubPort)))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	httpClient := &http.Client{Transport: &http.Transport{DialContext: node.Dial, Proxy: nil}, Timeout: 30 * time.Second}
	resp, err := httpClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	counts := map[string]int64{}
	g.Expect(json.NewDecoder(resp.Body).Decode(&counts)).To(Succeed())
	return counts
}

// startRatedHub runs test/standin/hub serving models, each file response
// at most bytesPerSecond, and waits until it is ready.
func startRatedHub(t testing.TB, ns string, bytesPerSecond int, models ...hubModel) *hub {
	t.Helper()
	pod := hubPod("")
	pod.Spec.Containers[0].Args = append(pod.Spec.Containers[0].Args, fmt.Sprintf("-rate-bytes-per-second=%d", bytesPerSecond))
	return runHub(t, ns, pod, models)
}

// podClock records when this process first saw each pod of a namespace
// and when it first saw it Ready, from a watch: finer than the seconds of
// a pod's timestamps, and independent of how often a test polls.
type podClock struct {
	mu    sync.Mutex
	seen  map[types.UID]time.Time
	ready map[types.UID]time.Time
}

// watchPods starts a podClock on ns until the test ends.
func watchPods(t testing.TB, ns string) *podClock {
	t.Helper()
	c := &podClock{seen: map[types.UID]time.Time{}, ready: map[types.UID]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(node.Clientset, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Pods().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.observe,
		UpdateFunc: func(_, obj any) { c.observe(obj) },
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	NewWithT(t).Expect(cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced)).To(BeTrue(), "the pod watch of %s synced", ns)
	return c
}

func (c *podClock) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[pod.UID]; !ok {
		c.seen[pod.UID] = now
	}
	if _, ok := c.ready[pod.UID]; !ok && podReady(pod) {
		c.ready[pod.UID] = now
	}
}

// seenAt waits until the clock has seen the pod and returns when.
func (c *podClock) seenAt(t testing.TB, uid types.UID) time.Time {
	t.Helper()
	return c.wait(t, c.seen, uid)
}

// readyAt waits until the clock has seen the pod Ready and returns when.
func (c *podClock) readyAt(t testing.TB, uid types.UID) time.Time {
	t.Helper()
	return c.wait(t, c.ready, uid)
}

func (c *podClock) wait(t testing.TB, times map[types.UID]time.Time, uid types.UID) time.Time {
	t.Helper()
	var at time.Time
	NewWithT(t).Eventually(func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		var ok bool
		at, ok = times[uid]
		return ok
	}).WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(100*time.Millisecond).Should(BeTrue(), "the watch saw pod %s", uid)
	return at
}
