//go:build linux

package node

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// revisionUnit is the size of each weights file of a revision; each
// revision's differ by a few bytes, so they are blobs of their own.
const revisionUnit = 3 << 20

// TestThreeRevisionChangesOnClaimsThatHoldTwo changes a two-replica
// server's revision three times on sized volumes (a tmpfs of the claim's
// size) that hold two revisions but not three: each change rolls the pods
// in place on their own claims, and each populator prunes the revision
// before the one its claim served, so none runs out of space.
func TestThreeRevisionChangesOnClaimsThatHoldTwo(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	revisions := []string{"v1", "v2", "v3", "v4"}
	var models []hubModel
	for i, revision := range revisions {
		models = append(models, hubModel{ID: smallModel, Branch: revision, Unit: revisionUnit + i})
	}
	h := startHub(t, ns, "", models...)
	size := resource.MustParse("8Mi")
	server := newServer("revisions", h, func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Replicas = new(int32(2))
		s.Spec.Model.Revision = revisions[0]
		s.Spec.Cache.StorageClassName = harness.SizedStorageClass
		s.Spec.Cache.Size = &size
	})
	applyObject(t, ns, serverObject(t, server))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	statefulSet := serverStatefulSets(t, got)[0]
	binding := servedBinding(t, got)
	bytes := *binding.Status.Realized.Bytes
	g.Expect(2*bytes).To(BeNumerically("<=", size.Value()), "the claims hold two revisions")
	g.Expect(3*bytes).To(BeNumerically(">", size.Value()), "but not three")

	for _, revision := range revisions[1:] {
		began := time.Now()
		server.Spec.Model.Revision = revision
		applyObject(t, ns, serverObject(t, server))
		rolled := waitRolledOut(t, client.ObjectKeyFromObject(server))
		g.Expect(rolled.Status.CacheBinding).NotTo(Equal(binding.Name))
		next := servedBinding(t, rolled)
		g.Expect(next.Spec.Identity.Revision).To(Equal(revision))
		g.Expect(next.Spec.Supersedes).To(Equal(binding.Name), "revision %s rolls in place on the same claims", revision)
		sets := serverStatefulSets(t, rolled)
		g.Expect(sets).To(HaveLen(1))
		g.Expect(sets[0].UID).To(Equal(statefulSet.UID), "no new StatefulSet, no new volume")
		realized := next.Status.Realized
		g.Expect(realized.FreeBytes).NotTo(BeNil(), "the populators reported their free bytes")
		t.Logf("revision %s served in place after %s: %d bytes cached, %d free, %d reclaimable on the least roomy claim",
			revision, time.Since(began).Round(time.Second), *realized.Bytes, *realized.FreeBytes, *realized.ReclaimableBytes)
		binding = next
	}
}

// servedBinding is the binding the server's status names, once its realized
// cache recorded the bytes.
func servedBinding(t *testing.T, server *embedopsv1.EmbeddingServer) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := &embedopsv1.ModelCacheBinding{}
	NewWithT(t).Eventually(func(g Gomega) {
		key := client.ObjectKey{Namespace: server.Namespace, Name: server.Status.CacheBinding}
		g.Expect(node.Client.Get(t.Context(), key, binding)).To(Succeed())
		g.Expect(binding.Status.Realized).NotTo(BeNil())
		g.Expect(binding.Status.Realized.Bytes).NotTo(BeNil())
	}).WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(time.Second).Should(Succeed())
	return binding
}
