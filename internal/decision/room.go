package decision

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// RevisionSize is what a revision of a model holds: its files' bytes, as
// the hub listed them or a populator cached them, and how many files; 0
// for either when not known.
type RevisionSize struct {
	Bytes int64
	Files int
}

// The headroom a revision needs on a claim beyond its files' bytes.
const (
	// blockBytes is the block a claim's filesystem is taken to have: 4 KiB,
	// ext4's and XFS's default (e2fsprogs misc/mke2fs.conf.in, blocksize =
	// 4096) and a tmpfs page on most kernels. A filesystem of larger blocks
	// that this undercounts ends, at worst, in the ENOSPC fallback
	// (OutOfRoomCondition), never in a replica left down.
	blockBytes = 4 << 10
	// blocksPerFile: each file's last block is partly empty, and its
	// snapshot link ("../../blobs/<64 hex>") is longer than the 60 bytes
	// ext4 keeps in the inode (fast symlinks, fs/ext4/ext4.h EXT4_N_BLOCKS),
	// so it takes a block of its own.
	blocksPerFile = 2
	// revisionMargin covers the rest: the snapshot's directories, its refs,
	// its manifest and the populator's records under .embedops, a block or
	// a few each.
	revisionMargin = 1 << 20
)

// RevisionNeeds is the space a revision takes on a claim: its bytes, two
// blocks of blockBytes per file (blocksPerFile) and revisionMargin. A
// revision whose files were not counted (status.realized.files is omitted
// when they are too many to list) is taken to have MaxRealizedFiles of
// them: a guess may only ever ask for more room, never less.
func RevisionNeeds(size RevisionSize) int64 {
	files := size.Files
	if files <= 0 {
		files = embedopsv1.MaxRealizedFiles
	}
	return size.Bytes + int64(files)*blocksPerFile*blockBytes + revisionMargin
}

// UsableBytes is what a populator can write on a fresh claim of size bytes
// when none reported its free space: ext4's defaults take 1/64 of the
// volume for inode tables (inode_size 256 per inode_ratio 16384,
// e2fsprogs misc/mke2fs.conf.in) and up to about as much for the journal,
// and reserve 5 % for root (mke2fs -m), which the populator, not root,
// cannot use: statfs(2) counts them in f_bfree, not in f_bavail.
func UsableBytes(size int64) int64 {
	return size - size/20 - size/32
}

// RealizedSize is the size of the revision a binding realized; ok is false
// when its bytes were not recorded.
func RealizedSize(realized *embedopsv1.RealizedCache) (RevisionSize, bool) {
	if realized == nil || realized.Bytes == nil {
		return RevisionSize{}, false
	}
	return RevisionSize{Bytes: *realized.Bytes, Files: len(realized.Files)}, true
}

// RoomForAnotherRevision reports whether the binding's claims have room
// for d's revision beside the one they serve, before that revision is
// resolved: it is taken to be as large as the realized one (blobs shared
// between revisions only make it smaller). Once it is resolved, its listed
// size is checked again (RoomForRevision).
func RoomForAnotherRevision(binding *embedopsv1.ModelCacheBinding, d *Decision) bool {
	current, ok := RealizedSize(binding.Status.Realized)
	return ok && RoomForRevision(binding, d, current)
}

// RoomForRevision reports whether the binding's claims have room for a
// revision of size next beside the one they serve. The populator prunes
// older revisions before it fetches a new one (populate, Pruning), so the
// room is the least any claim's populator reported (freeBytes, statfs
// f_bavail) plus what that pruning frees (reclaimableBytes) plus what a
// larger size in d adds; the revision needs RevisionNeeds of it. Claims
// whose room no populator recorded (an earlier release's) must hold both
// revisions, each with its headroom, within UsableBytes of d's size.
// Unknown bytes never fit.
func RoomForRevision(binding *embedopsv1.ModelCacheBinding, d *Decision, next RevisionSize) bool {
	realized := binding.Status.Realized
	current, ok := RealizedSize(realized)
	if !ok || next.Bytes <= 0 {
		return false
	}
	if realized.FreeBytes == nil {
		return RevisionNeeds(current)+RevisionNeeds(next) <= UsableBytes(d.Decision.Size.Value())
	}
	grown := max(d.Decision.Size.Value()-binding.Spec.Decision.Size.Value(), 0)
	return RevisionNeeds(next) <= *realized.FreeBytes+ptr.Deref(realized.ReclaimableBytes, 0)+grown
}

// OutOfRoom reports whether the binding's claims were found to have no
// room for its revision (OutOfRoomCondition): no server uses it again
// (Reusable), and none hands its storage on (Supersedable).
func OutOfRoom(binding *embedopsv1.ModelCacheBinding) bool {
	return apimeta.IsStatusConditionTrue(binding.Status.Conditions, embedopsv1.OutOfRoomCondition)
}
