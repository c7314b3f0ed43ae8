//go:build linux

package node

import (
	"encoding/json"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/test/harness"
)

// TestScaleUpCopiesTheFirstReplicasCacheWithoutTheHub starts from a
// one-replica server whose hub is gone once its cache is filled (an
// air-gapped cluster, a hub that rate-limits) and scales it to three, once
// with seed Clone and once with Auto, which on this node snapshots (the
// harness's driver has a default VolumeSnapshotClass). The new replicas'
// claims are clones of the first, or restores of the one VolumeSnapshot
// the binding took of it (the harness's CSI stand-in copies the volume, as
// csi-driver-host-path does; the real snapshot-controller binds the
// snapshot); their populators see another pod's cache, hash every file
// against its manifest, ask the hub nothing (nothing answers), and report
// the copy; the binding records each copy, and all three replicas serve
// the first one's commit.
func TestScaleUpCopiesTheFirstReplicasCacheWithoutTheHub(t *testing.T) {
	requireNode(t)
	t.Parallel()
	for _, tc := range []struct {
		name   string
		seed   embedopsv1.CacheSeed
		method embedopsv1.ClaimFillMethod
	}{
		{"clone", embedopsv1.CacheSeedClone, embedopsv1.ClaimFilledByClone},
		{"auto snapshots", "", embedopsv1.ClaimFilledBySnapshot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			scaleUpWithoutTheHub(t, tc.seed, tc.method)
		})
	}
}

// scaleUpWithoutTheHub scales a one-replica server of seed to three with
// its hub gone, checks that both new claims were copied by method, and,
// for a snapshot, that the binding's retirement deletes the snapshot and
// its data.
func scaleUpWithoutTheHub(t *testing.T, seed embedopsv1.CacheSeed, method embedopsv1.ClaimFillMethod) {
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h, server, first := readyServerWithOnePod(t, ns, "seeded", func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.Seed = seed
		s.Spec.Cache.RetainFor = &metav1.Duration{}
	})
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

	binding := getModelCacheBinding(t, ns, got.Status.CacheBinding)
	from := copySourceRef(binding, commit, method, source[0])
	pods := serverPods(t, got)
	g.Expect(pods).To(HaveLen(3))
	var copies []embedopsv1.ClaimFill
	for i := range pods {
		pod := &pods[i]
		if pod.Name == first[0].Name {
			continue
		}
		claims := claimsOf(pod)
		g.Expect(claims).To(HaveLen(1))
		claim := &corev1.PersistentVolumeClaim{}
		g.Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: claims[0]}, claim)).To(Succeed())
		g.Expect(claim.Spec.DataSourceRef).To(Equal(from), "claim %s", claim.Name)
		result := populateResultOf(t, pod)
		g.Expect(result.CopiedFrom).To(Equal(first[0].Name), "pod %s hashed the copy of %s", pod.Name, first[0].Name)
		g.Expect(result.ResolvedCommit).To(Equal(commit))
		copies = append(copies, embedopsv1.ClaimFill{Name: claim.Name, Method: method, Source: from.Name, Commit: commit})
	}
	g.Expect(binding.Status.ClaimFills).To(ConsistOf(copies))
	g.Expect(binding.Status.Realized.ContentDigest).NotTo(BeEmpty())
	for i := range pods {
		g.Expect(populateResultOf(t, &pods[i]).ContentDigest).To(Equal(binding.Status.Realized.ContentDigest), "pod %s", pods[i].Name)
	}
	if method == embedopsv1.ClaimFilledBySnapshot {
		checkSnapshotGoesWithTheBinding(t, got, binding, from.Name)
	}
}

// copySourceRef is the dataSourceRef of a copy by method: the source
// claim, or the binding's VolumeSnapshot at commit.
func copySourceRef(binding *embedopsv1.ModelCacheBinding, commit string, method embedopsv1.ClaimFillMethod, source string) *corev1.TypedObjectReference {
	if method == embedopsv1.ClaimFilledBySnapshot {
		group := snapshotv1.GroupName
		return &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: decision.SnapshotName(binding.Name, commit)}
	}
	return &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: source}
}

// checkSnapshotGoesWithTheBinding deletes the server (retainFor 0) and
// waits for its binding to be Released: by then the binding deleted its
// snapshot, the real snapshot-controller its VolumeSnapshotContent (policy
// Delete), and the harness's driver the snapshot's directory.
func checkSnapshotGoesWithTheBinding(t *testing.T, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, name string) {
	g := NewWithT(t)
	g.Expect(binding.Spec.Resources.VolumeSnapshotNames).To(Equal([]string{name}))
	snapshot := &snapshotv1.VolumeSnapshot{}
	g.Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: binding.Namespace, Name: name}, snapshot)).To(Succeed())
	g.Expect(snapshot.Status).NotTo(BeNil())
	g.Expect(snapshot.Status.BoundVolumeSnapshotContentName).NotTo(BeNil())
	content := &snapshotv1.VolumeSnapshotContent{}
	g.Expect(node.Client.Get(t.Context(), client.ObjectKey{Name: *snapshot.Status.BoundVolumeSnapshotContentName}, content)).To(Succeed())
	g.Expect(content.Status).NotTo(BeNil())
	g.Expect(content.Status.SnapshotHandle).NotTo(BeNil())
	g.Expect(*content.Status.SnapshotHandle).To(BeADirectory())

	g.Expect(node.Client.Delete(t.Context(), server)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getModelCacheBinding(t, binding.Namespace, binding.Name).Status.Phase).To(Equal(embedopsv1.BindingReleased))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(apierrors.IsNotFound(node.Client.Get(t.Context(), client.ObjectKeyFromObject(snapshot), &snapshotv1.VolumeSnapshot{}))).To(BeTrue(),
		"the binding is Released once its snapshot is gone")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(node.Client.Get(t.Context(), client.ObjectKeyFromObject(content), &snapshotv1.VolumeSnapshotContent{}))
	}, time.Minute, time.Second).Should(BeTrue(), "snapshot-controller deletes the content")
	g.Expect(*content.Status.SnapshotHandle).NotTo(BeADirectory(), "no data outlives the binding")
}

// populateResultOf is what a pod's populate init container reported in
// its termination message.
func populateResultOf(t testing.TB, pod *corev1.Pod) populate.Result {
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
