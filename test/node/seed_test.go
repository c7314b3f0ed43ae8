//go:build linux

package node

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/test/harness"
)

// TestScaleUpCopiesTheFirstReplicasCacheWithoutTheHub starts from a
// one-replica server whose hub is gone once its cache is filled (an
// air-gapped cluster, a hub that rate-limits) and scales it to three. The
// new replicas' claims are clones of the first (the harness's CSI stand-in
// copies the volume, as csi-driver-host-path does); their populators see
// another pod's cache, hash every file against its manifest, ask the hub
// nothing (nothing answers), and report the copy; the binding records both
// clones, and all three replicas serve the first one's commit.
func TestScaleUpCopiesTheFirstReplicasCacheWithoutTheHub(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h, server, first := readyServerWithOnePod(t, ns, "seeded")
	source := claimsOf(&first[0])
	g.Expect(source).To(HaveLen(1))

	h.stop(t)
	began := time.Now()
	server.Spec.Replicas = new(int32(3))
	applyObject(t, ns, serverObject(t, server))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	t.Logf("3 replicas Ready %s after the scale from 1, the hub gone", time.Since(began).Round(time.Millisecond))
	commit := h.commits[smallModel]
	checkServedFromCache(t, got, commit, "")

	pods := serverPods(t, got)
	g.Expect(pods).To(HaveLen(3))
	var clones []embedopsv1.ClaimFill
	for i := range pods {
		pod := &pods[i]
		if pod.Name == first[0].Name {
			continue
		}
		claims := claimsOf(pod)
		g.Expect(claims).To(HaveLen(1))
		claim := &corev1.PersistentVolumeClaim{}
		g.Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: claims[0]}, claim)).To(Succeed())
		g.Expect(claim.Spec.DataSourceRef).To(Equal(&corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: source[0]}), "claim %s", claim.Name)
		result := populateResultOf(t, pod)
		g.Expect(result.CopiedFrom).To(Equal(first[0].Name), "pod %s hashed the copy of %s", pod.Name, first[0].Name)
		g.Expect(result.ResolvedCommit).To(Equal(commit))
		clones = append(clones, embedopsv1.ClaimFill{Name: claim.Name, Method: embedopsv1.ClaimFilledByClone, Source: source[0], Commit: commit})
	}
	binding := getModelCacheBinding(t, ns, got.Status.CacheBinding)
	g.Expect(binding.Status.ClaimFills).To(ConsistOf(clones))
	g.Expect(binding.Status.Realized.ContentDigest).NotTo(BeEmpty())
	for i := range pods {
		g.Expect(populateResultOf(t, &pods[i]).ContentDigest).To(Equal(binding.Status.Realized.ContentDigest), "pod %s", pods[i].Name)
	}
}

// populateResultOf is what a pod's populate init container reported in
// its termination message.
func populateResultOf(t *testing.T, pod *corev1.Pod) populate.Result {
	t.Helper()
	g := NewWithT(t)
	statuses := pod.Status.InitContainerStatuses
	g.Expect(statuses).To(HaveLen(1), "pod %s", pod.Name)
	g.Expect(statuses[0].Name).To(Equal(builder.PopulateContainerName))
	g.Expect(statuses[0].State.Terminated).NotTo(BeNil(), "pod %s", pod.Name)
	var result populate.Result
	g.Expect(json.Unmarshal([]byte(statuses[0].State.Terminated.Message), &result)).To(Succeed(), "pod %s", pod.Name)
	return result
}
