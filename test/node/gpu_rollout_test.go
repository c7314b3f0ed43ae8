//go:build linux

package node

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// TestStorageChangeOnAFullGPUPool runs a one-replica server holding the
// node's only GPU and changes its storage class. With the default surge the
// new pod finds no GPU (kube-scheduler: Insufficient nvidia.com/gpu), the
// old pod keeps serving, and the server says why and names maxSurge: 0;
// with spec.rollout.maxSurge: 0 the old pod gives the GPU up first and the
// new one serves /embed from the new storage. It runs alone (not parallel),
// so no other test's pod takes the GPU.
func TestStorageChangeOnAFullGPUPool(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	gpu := resource.MustParse("1")
	advertiseGPUs(t, gpu)
	ns := harness.Namespace(t, node.Client)
	h := startHub(t, ns, "", hubModel{ID: smallModel})
	server := newServer("gpu", h, func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuResource: gpu}}
	})
	key := client.ObjectKeyFromObject(server)
	applyObject(t, ns, serverObject(t, server))
	waitServerReady(t, key)

	server.Spec.Cache.StorageClassName = "fast"
	applyObject(t, ns, serverObject(t, server))
	g.Eventually(func(g Gomega) {
		got := &embedopsv1.EmbeddingServer{}
		g.Expect(node.Client.Get(t.Context(), key, got)).To(Succeed())
		ready := conditions.Get(got, embedopsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(embedopsv1.UnschedulableReason), func() string { return report(t, got) })
		g.Expect(ready.Message).To(And(ContainSubstring("Insufficient "+string(gpuResource)), ContainSubstring("spec.rollout.maxSurge: 0")))
		g.Expect(conditions.IsTrue(got, embedopsv1.ReconcilingCondition)).To(BeTrue(), "progress until the deadline")
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(1)), "the old pod keeps serving")
	}).WithContext(t.Context()).WithTimeout(serverTimeout).WithPolling(time.Second).Should(Succeed())

	server.Spec.Rollout = &embedopsv1.RolloutSpec{MaxSurge: new(intstr.FromInt32(0))}
	applyObject(t, ns, serverObject(t, server))
	rolled := waitRolledOut(t, key)
	waitServerReady(t, key)
	sets := serverStatefulSets(t, rolled)
	g.Expect(sets).To(HaveLen(1))
	pods := serverPods(t, rolled)
	g.Expect(pods).To(HaveLen(1))
	for _, claim := range claimsOf(&pods[0]) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: claim}, pvc)).To(Succeed())
		g.Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal("fast")), "the new pod mounts the new storage")
	}
	g.Expect(podTEI(&pods[0], rolled.Spec.Port, "").embed(t, "a full GPU pool")).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		var events corev1.EventList
		g.Expect(node.Client.List(t.Context(), &events, client.InNamespace(ns))).To(Succeed())
		var said []string
		for _, event := range events.Items {
			if event.InvolvedObject.Kind == embedopsv1.EmbeddingServerKind {
				said = append(said, event.Reason+": "+event.Message)
			}
		}
		g.Expect(said).To(ContainElement(And(HavePrefix(embedopsv1.MovingToNewStorageReason+": "),
			ContainSubstring("gives up 1 of its 1 replicas"), ContainSubstring("the server serves nothing until the new pod is ready"))))
	}).WithTimeout(time.Minute).Should(Succeed())
}
