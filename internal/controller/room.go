package controller

import (
	"k8s.io/utils/ptr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// withLeastRoom gives realized the room of the claim with the least of it
// (free plus reclaimable bytes) among the pods in done whose populator
// reported it for the realized commit and digest: an in-place revision
// change must fit on every claim (decision.RoomForAnotherRevision).
func withLeastRoom(realized *embedopsv1.RealizedCache, done []populateOutcome) {
	for _, outcome := range done {
		result := outcome.result.Result
		if result.ResolvedCommit != realized.ResolvedCommit || result.ContentDigest != realized.ContentDigest || result.FreeBytes == nil {
			continue
		}
		room := *result.FreeBytes + ptr.Deref(result.ReclaimableBytes, 0)
		if realized.FreeBytes == nil || room < *realized.FreeBytes+ptr.Deref(realized.ReclaimableBytes, 0) {
			realized.FreeBytes = ptr.To(*result.FreeBytes)
			realized.ReclaimableBytes = ptr.To(ptr.Deref(result.ReclaimableBytes, 0))
		}
	}
}
