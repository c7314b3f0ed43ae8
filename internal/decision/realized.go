package decision

import (
	"cmp"
	"slices"

	"k8s.io/utils/ptr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// MergeRealized fills the unset fields of recorded (nil: none) from found;
// a set field is immutable and kept, but the room (freeBytes and
// reclaimableBytes), which found replaces whenever it carries one for the
// recorded commit and digest: the least room over the replicas' latest
// populate results changes as each finishes (controller withLeastRoom).
func MergeRealized(recorded, found *embedopsv1.RealizedCache) *embedopsv1.RealizedCache {
	merged := recorded.DeepCopy()
	if merged == nil {
		merged = &embedopsv1.RealizedCache{}
	}
	merged.ResolvedCommit = cmp.Or(merged.ResolvedCommit, found.ResolvedCommit)
	merged.ContentDigest = cmp.Or(merged.ContentDigest, found.ContentDigest)
	// Files and bytes describe one snapshot: taken only from the result of
	// the recorded commit and digest.
	if found.ResolvedCommit == merged.ResolvedCommit && found.ContentDigest == merged.ContentDigest {
		if merged.Files == nil {
			merged.Files = slices.Clone(found.Files)
		}
		if merged.Bytes == nil && found.Bytes != nil {
			merged.Bytes = new(*found.Bytes)
		}
		// The room is one claim's: both values or neither.
		if found.FreeBytes != nil {
			merged.FreeBytes = new(*found.FreeBytes)
			merged.ReclaimableBytes = ptr.To(ptr.Deref(found.ReclaimableBytes, 0))
		}
	}
	return merged
}
