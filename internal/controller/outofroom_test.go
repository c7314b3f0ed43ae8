package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/test/fixtures"
)

// diskFullPopulate is a populate init container that failed as `embedops
// populate` does on a full claim: exit 1, its error and the reason
// populate.DiskFullReason in the termination message, waiting to restart.
func diskFullPopulate() corev1.ContainerStatus {
	status := terminatedPopulate(1, `{"error":"no space left in the cache directory: raise cache.size: writing blobs/x: no space left on device","reason":"`+
		populate.DiskFullReason+`"}`)
	status.LastTerminationState, status.State.Terminated = status.State, nil
	status.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	return status
}

// A revision rolling in place on claims that turn out too small falls back
// to storage of its own, whether its resolve Job lists more than the room
// the claims reported or a pod's populator finds no space left: the
// binding is marked out of room, the server gets a new binding and a
// StatefulSet beside the serving one, and its events say why.
func TestARevisionWithoutRoomOnTheClaimsMovesToNewStorage(t *testing.T) {
	cases := []struct {
		name     string
		resolved string
		diskFull bool
		reason   string
		message  string
	}{
		{"the resolve Job lists more than the claims have room for", `"files":3,"bytes":6442450944`, false,
			embedopsv1.RevisionTooLargeReason, "lists 3 files of 6442450944 bytes"},
		{"a pod finds no space left on its claim", `"files":0,"bytes":0`, true,
			embedopsv1.NoSpaceLeftReason, "pod tei-2 found no space left"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			key, first := threeReplicasAtV1(t, g)
			namespace := key.Namespace
			createServerPod(t, g, key, "0", populatedWithRoom(4<<30, 1<<30, 4<<30))
			g.Eventually(func(g Gomega) {
				g.Expect(getBinding(t, g, namespace, first.Name).Status.Realized.FreeBytes).NotTo(BeNil())
			}).Should(Succeed())

			updateServer(t, g, key, fixtures.WithModel(fixtures.Model, "v2"))
			second := bindingBeside(t, g, first)
			g.Expect(second.Spec.Supersedes).To(Equal(first.Name), "5Gi of room for a revision taken to be 4Gi: it rolls in place")
			completeJob(t, g, populateJobOf(t, g, namespace, second.Name),
				terminatedPopulate(0, `{"resolvedCommit":"`+commitB+`","contentDigest":"",`+tc.resolved+`}`))
			if tc.diskFull {
				waitForBinding(t, g, key, first.Name)
				createServerPod(t, g, key, "2", diskFullPopulate())
			}

			g.Eventually(func(g Gomega) {
				marked := getBinding(t, g, namespace, second.Name)
				g.Expect(decision.OutOfRoom(marked)).To(BeTrue())
				g.Expect(apimeta.FindStatusCondition(marked.Status.Conditions, embedopsv1.OutOfRoomCondition)).To(And(
					HaveField("Reason", tc.reason), HaveField("Message", ContainSubstring(tc.message))))
			}).Should(Succeed())
			// The new binding resolves its revision before its StatefulSet
			// starts, as every new PerReplica binding does.
			completeJob(t, g, populateJobOf(t, g, namespace, cacheBindingOfJob(t, g, namespace, first.Name, second.Name)),
				terminatedPopulate(0, `{"resolvedCommit":"`+commitB+`","contentDigest":"","files":0,"bytes":0}`))
			var third *embedopsv1.ModelCacheBinding
			g.Eventually(func(g Gomega) {
				server := getServer(t, g, key)
				g.Expect(server.Status.CacheBinding).NotTo(BeElementOf("", first.Name, second.Name), "the server moves on from both")
				third = getBinding(t, g, namespace, server.Status.CacheBinding)
			}).Should(Succeed())
			g.Expect(third.Spec.Supersedes).To(BeEmpty(), "storage of its own")
			g.Expect(decision.StorageName(third)).NotTo(Equal(decision.StorageName(second)))

			g.Eventually(func(g Gomega) {
				g.Expect(statefulSetsOf(t, g, namespace)).To(ContainElement(HaveField("Spec.Template.Labels",
					HaveKeyWithValue(embedopsv1.CacheBindingLabel, decision.StorageName(third)))), "a StatefulSet on the new storage")
				g.Expect(warningEvents(t, g, namespace, key.Name, tc.reason)).To(ContainElement(
					HaveField("Message", ContainSubstring("the pods move to new storage instead"))))
				g.Expect(eventsAbout(t, g, namespace, key.Name, corev1.EventTypeNormal, embedopsv1.MovingToNewStorageReason)).To(ContainElement(
					HaveField("Message", And(ContainSubstring("no room on the old claims: "), ContainSubstring(tc.message)))))
			}).Should(Succeed())
		})
	}
}
