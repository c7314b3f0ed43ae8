package controller

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// populatedWithRoom is a populate init container that cached bytes of
// commitA and left free bytes on its claim, reclaimable more by pruning.
func populatedWithRoom(bytes, free, reclaimable int64) corev1.ContainerStatus {
	return terminatedPopulate(0, fmt.Sprintf(`{"resolvedCommit":%q,"contentDigest":%q,"files":3,"bytes":%d,"freeBytes":%d,"reclaimableBytes":%d}`,
		commitA, digestA, bytes, free, reclaimable))
}

// An in-place revision change checks the room the populators reported on
// the claims, not twice the model against the claims' nominal size.
func TestRevisionChangeChecksTheRoomThePopulatorsReported(t *testing.T) {
	cases := []struct {
		name                     string
		bytes, free, reclaimable int64
		inPlace                  bool
	}{
		{"4Gi fits twice in 10Gi, but 1Gi is free", 4 << 30, 1 << 30, 0, false},
		{"6Gi does not fit twice in 10Gi, but pruning frees enough", 6 << 30, 3 << 30, 4 << 30, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			key, first := threeReplicasAtV1(t, g)
			namespace := key.Namespace
			createServerPod(t, g, key, "0", populatedWithRoom(tc.bytes, tc.free, tc.reclaimable))
			g.Eventually(func(g Gomega) {
				realized := getBinding(t, g, namespace, first.Name).Status.Realized
				g.Expect(realized).NotTo(BeNil())
				g.Expect(realized.FreeBytes).To(HaveValue(Equal(tc.free)), "the binding records the claim's free bytes")
				g.Expect(realized.ReclaimableBytes).To(HaveValue(Equal(tc.reclaimable)))
			}).Should(Succeed())

			updateServer(t, g, key, fixtures.WithModel(fixtures.Model, "v2"))
			second := bindingBeside(t, g, first)
			if tc.inPlace {
				g.Expect(second.Spec.Supersedes).To(Equal(first.Name), "the claims have room: the pods roll in place")
				return
			}
			g.Expect(second.Spec.Supersedes).To(BeEmpty(), "no room on the claims: new storage beside the old")
			g.Expect(decision.StorageName(second)).NotTo(Equal(decision.StorageName(first)), "claims of its own")
		})
	}
}

// bindingBeside waits for the binding the ledger creates after first and
// returns it; the server moves to it only once its resolve Job ran.
func bindingBeside(t *testing.T, g *WithT, first *embedopsv1.ModelCacheBinding) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var second *embedopsv1.ModelCacheBinding
	g.Eventually(func(g Gomega) {
		var bindings embedopsv1.ModelCacheBindingList
		g.Expect(env.Client.List(t.Context(), &bindings, client.InNamespace(first.Namespace))).To(Succeed())
		g.Expect(bindings.Items).To(HaveLen(2))
		for i := range bindings.Items {
			if bindings.Items[i].Name != first.Name {
				second = &bindings.Items[i]
			}
		}
	}).Should(Succeed())
	return second
}

// The binding records the least room over every replica's latest result:
// down as each reports, up only once every replica has.
func TestWithLeastRoomFollowsEveryReplicasLatestResult(t *testing.T) {
	recorded := func(free, reclaimable int64) *embedopsv1.RealizedCache {
		return &embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, FreeBytes: new(free), ReclaimableBytes: new(reclaimable)}
	}
	pod := func(name string, free, reclaimable int64) corev1.Pod {
		return podWith(name, populatedWithRoom(10, free, reclaimable))
	}
	cases := []struct {
		name     string
		planned  *embedopsv1.RealizedCache
		recorded *embedopsv1.RealizedCache
		pods     []corev1.Pod
		replicas int32
		want     *embedopsv1.RealizedCache
	}{
		{"the first record takes the least of those done", &embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, FreeBytes: new(int64(500))},
			nil, []corev1.Pod{pod("tei-0", 500, 100), pod("tei-1", 300, 250), pod("tei-2", 400, 0)}, 3, recorded(400, 0)},
		{"a replica reporting less lowers it", nil, recorded(400, 0), []corev1.Pod{pod("tei-0", 500, 100), pod("tei-1", 200, 0)}, 3, recorded(200, 0)},
		{"more room from some replicas keeps it", nil, recorded(400, 0), []corev1.Pod{pod("tei-0", 500, 100), pod("tei-1", 900, 0)}, 3, nil},
		{"more room from every replica raises it", nil, recorded(400, 0),
			[]corev1.Pod{pod("tei-0", 500, 100), pod("tei-1", 900, 0), pod("tei-2", 700, 0)}, 3, recorded(500, 100)},
		{"the same room writes nothing", nil, recorded(400, 0), []corev1.Pod{pod("tei-0", 400, 0), pod("tei-1", 900, 0)}, 2, nil},
		{"another commit's pods say nothing", nil, recorded(400, 0), []corev1.Pod{podWith("tei-0", terminatedPopulate(0,
			`{"resolvedCommit":"`+commitB+`","contentDigest":"`+digestB+`","files":3,"bytes":10,"freeBytes":1}`))}, 1, nil},
		{"a pod still downloading says nothing", nil, recorded(400, 0), []corev1.Pod{podWith("tei-0", runningPopulate())}, 1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(withLeastRoom(tc.planned, tc.recorded, tc.pods, tc.replicas)).To(Equal(tc.want))
		})
	}
}

// A populate failure is a full disk only when the populator says so in its
// termination message's reason, read from the last termination while the
// container waits to restart.
func TestPopulateOutcomeTellsAFullDisk(t *testing.T) {
	g := NewWithT(t)
	full := podWith("tei-2", diskFullPopulate())
	outcome, ok := populateOutcomeOf(&full)
	g.Expect(ok).To(BeTrue())
	g.Expect(outcome.failed).To(BeTrue())
	g.Expect(outcome.diskFull).To(BeTrue())
	g.Expect(outcome.detail).To(ContainSubstring("no space left"))
	other := podWith("tei-2", terminatedPopulate(1, `{"error":"the hub refused the token"}`))
	outcome, _ = populateOutcomeOf(&other)
	g.Expect(outcome.failed).To(BeTrue())
	g.Expect(outcome.diskFull).To(BeFalse())
}

// threeReplicasAtV1 starts a manager over a new namespace and creates a
// server of three replicas of revision v1 on 10Gi claims, its resolve Job
// completed; it returns the server and its first binding.
func threeReplicasAtV1(t *testing.T, g *WithT) (types.NamespacedName, *embedopsv1.ModelCacheBinding) {
	t.Helper()
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	playStatefulSetController(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(3), fixtures.WithCacheSize("10Gi"),
		fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithRetainFor(time.Hour)))
	completeResolveJob(t, g, namespace)
	return key, waitForBinding(t, g, key, "")
}
