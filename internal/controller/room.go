package controller

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/internal/populate"
)

// claimRoom is what one claim's populator reported of its room.
type claimRoom struct {
	free, reclaimable int64
}

// total is the room a next revision has on the claim: what is free plus
// what pruning frees first.
func (c claimRoom) total() int64 { return c.free + c.reclaimable }

// withLeastRoom adds to planned, the realized cache the binding is about
// to record (nil: nothing yet), the room of the claim with the least of it
// (decision.RoomForRevision checks the next revision against it), from
// each pod's latest populate result for the binding's commit and digest:
// the termination message of its populate init container, which the
// kubelet replaces when the container runs again. With every replica
// reported the least of them is recorded, up or down; before that, only
// a smaller room than the recorded one, so a claim whose pod is being
// replaced keeps counting. It returns planned, or a new record holding
// only the room when it changed, or nil when nothing changes.
func withLeastRoom(planned, recorded *embedopsv1.RealizedCache, pods []corev1.Pod, replicas int32) *embedopsv1.RealizedCache {
	if planned != nil {
		// The first pod's room, from realizedOf: the least is set below.
		planned.FreeBytes, planned.ReclaimableBytes = nil, nil
	}
	of := planned
	if of == nil {
		of = recorded
	}
	if of == nil || of.ResolvedCommit == "" || of.ContentDigest == "" {
		return planned
	}
	least, reported := leastRoom(of.ResolvedCommit, of.ContentDigest, pods)
	if reported == 0 {
		return planned
	}
	if before, ok := recordedRoom(recorded); ok && (before == least || (reported < int(replicas) && before.total() <= least.total())) {
		return planned
	}
	if planned == nil {
		planned = &embedopsv1.RealizedCache{ResolvedCommit: of.ResolvedCommit, ContentDigest: of.ContentDigest}
	}
	planned.FreeBytes, planned.ReclaimableBytes = ptr.To(least.free), ptr.To(least.reclaimable)
	return planned
}

// leastRoom is the room of the claim with the least of it among the pods
// whose populator finished commit with digest and reported its room, and
// how many did.
func leastRoom(commit, digest string, pods []corev1.Pod) (claimRoom, int) {
	var least claimRoom
	reported := 0
	for i := range pods {
		outcome, ok := populateOutcomeOf(&pods[i])
		result := outcome.result.Result
		if !ok || !outcome.done || result.ResolvedCommit != commit || result.ContentDigest != digest || result.FreeBytes == nil {
			continue
		}
		room := claimRoom{free: *result.FreeBytes, reclaimable: ptr.Deref(result.ReclaimableBytes, 0)}
		if reported == 0 || room.total() < least.total() {
			least = room
		}
		reported++
	}
	return least, reported
}

// recordedRoom is the room the binding recorded, if any.
func recordedRoom(recorded *embedopsv1.RealizedCache) (claimRoom, bool) {
	if recorded == nil || recorded.FreeBytes == nil {
		return claimRoom{}, false
	}
	return claimRoom{free: *recorded.FreeBytes, reclaimable: ptr.Deref(recorded.ReclaimableBytes, 0)}, true
}

// outOfRoomWrite marks the binding in use out of room
// (ledger.MarkOutOfRoom), with a Warning event of the server.
type outOfRoomWrite struct {
	reason, message string
}

// planOutOfRoom plans the fallback of a change that rolls on claims taken
// over from a predecessor (spec.supersedes) when a pod's populator found
// no space left on its claim (populate.DiskFullReason): the binding is
// marked out of room, and the next Bind gives the server storage of its
// own, which the pods move to surge first instead of staying a replica
// down. A binding of storage of its own that runs out of space is too
// small for its model whatever the storage: that stays DownloadFailed.
func planOutOfRoom(scope *serverScope, pods []corev1.Pod) {
	binding := scope.binding
	if binding.Spec.Supersedes == "" || decision.OutOfRoom(binding) {
		return
	}
	for i := range pods {
		outcome, ok := populateOutcomeOf(&pods[i])
		if !ok || !outcome.failed || !outcome.diskFull {
			continue
		}
		scope.plan.outOfRoom = &outOfRoomWrite{reason: embedopsv1.NoSpaceLeftReason, message: fmt.Sprintf(
			"pod %s found no space left on its claim for %s at %s, on the claims taken over from binding %s: %s",
			outcome.pod, binding.Spec.Identity.Model, binding.Spec.Identity.Revision, binding.Spec.Supersedes, outcome.detail)}
		return
	}
}

// markOutOfRoom writes the planned mark, and tells the server's events
// once that its pods move to new storage.
func (r *EmbeddingServerReconciler) markOutOfRoom(ctx context.Context, scope *serverScope, write *outOfRoomWrite) error {
	if write == nil {
		return nil
	}
	wrote, err := r.ledger.MarkOutOfRoom(ctx, scope.binding, write.reason, write.message)
	if wrote {
		r.events.Eventf(scope.server, nil, corev1.EventTypeWarning, write.reason, "Rollout",
			"%s; the pods move to new storage instead", write.message)
	}
	return err
}

// outOfRoomWhy is why pods leave storage whose binding ran out of room:
// its OutOfRoom message; "" when no binding of storage did.
func outOfRoomWhy(bindings []embedopsv1.ModelCacheBinding, storage string) string {
	for i := range bindings {
		if decision.StorageName(&bindings[i]) == storage && decision.OutOfRoom(&bindings[i]) {
			return "no room on the old claims: " + conditions.GetMessage(&bindings[i], embedopsv1.OutOfRoomCondition)
		}
	}
	return ""
}

// checkListedRoom checks, once a binding that rolls a new revision on its
// predecessor's claims has resolved it, the room for what the revision
// lists (the resolve Job's files and bytes, populate.Resolve) against the
// room the predecessor's populators reported (decision.RoomForRevision).
// When it does not fit, the binding is planned out of room
// (RevisionTooLarge) and the phases stop, so no pod rolls onto claims too
// small for it and the server moves to storage of its own instead.
func (r *EmbeddingServerReconciler) checkListedRoom(ctx context.Context, scope *serverScope, listed populate.Result) error {
	binding := scope.binding
	if binding.Spec.Supersedes == "" || decision.OutOfRoom(binding) || listed.Bytes <= 0 {
		return nil
	}
	predecessor := &embedopsv1.ModelCacheBinding{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: binding.Spec.Supersedes}, predecessor); err != nil {
		return client.IgnoreNotFound(err)
	}
	next := decision.RevisionSize{Bytes: listed.Bytes, Files: listed.Files}
	if predecessor.Spec.Identity.Revision == binding.Spec.Identity.Revision || decision.RoomForRevision(predecessor, decision.Recorded(binding), next) {
		return nil
	}
	scope.plan.outOfRoom = &outOfRoomWrite{reason: embedopsv1.RevisionTooLargeReason, message: fmt.Sprintf(
		"%s at %s lists %d files of %d bytes, which need %d bytes on each claim with their headroom: more than the claims taken over from binding %s have room for",
		binding.Spec.Identity.Model, binding.Spec.Identity.Revision, next.Files, next.Bytes, decision.RevisionNeeds(next), predecessor.Name)}
	scope.halted = true
	return nil
}
