package controller

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
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
			namespace := harness.Namespace(t, env.Client)
			startManager(t, namespace, withPopulator)
			playStatefulSetController(t, namespace)
			key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(3), fixtures.WithCacheSize("10Gi"),
				fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithRetainFor(time.Hour)))
			completeResolveJob(t, g, namespace)
			first := waitForBinding(t, g, key, "")
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

// The binding records the room of the claim with the least of it among the
// pods that reported: the next revision must fit on every claim.
func TestModelReportRecordsTheLeastRoom(t *testing.T) {
	g := NewWithT(t)
	pods := []corev1.Pod{
		podWith("tei-0", populatedWithRoom(10, 500, 100)),
		podWith("tei-1", populatedWithRoom(10, 300, 250)),
		podWith("tei-2", populatedWithRoom(10, 400, 0)),
	}
	report, ok := modelReportOf(pods, nil)
	g.Expect(ok).To(BeTrue())
	g.Expect(report.realized.FreeBytes).To(HaveValue(Equal(int64(400))), "tei-2 has 400 bytes of room, tei-1 550, tei-0 600")
	g.Expect(report.realized.ReclaimableBytes).To(HaveValue(BeZero()))
	g.Expect(embedopsv1.RealizedCache{}.FreeBytes).To(BeNil())
}
