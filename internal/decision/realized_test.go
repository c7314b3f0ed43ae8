package decision_test

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

func TestMergeRealizedTakesTheLatestRoomOfTheRecordedSnapshot(t *testing.T) {
	g := NewWithT(t)
	commit, digest := "1111111111111111111111111111111111111111", "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	recorded := &embedopsv1.RealizedCache{ResolvedCommit: commit, ContentDigest: digest}
	other := &embedopsv1.RealizedCache{ResolvedCommit: "2222222222222222222222222222222222222222", FreeBytes: new(int64(5))}
	g.Expect(decision.MergeRealized(recorded, other).FreeBytes).To(BeNil(), "another commit's claim says nothing of this one's")

	found := &embedopsv1.RealizedCache{ResolvedCommit: commit, ContentDigest: digest, FreeBytes: new(int64(7))}
	merged := decision.MergeRealized(recorded, found)
	g.Expect(merged.FreeBytes).To(HaveValue(Equal(int64(7))))
	g.Expect(merged.ReclaimableBytes).To(HaveValue(BeZero()), "a room is recorded whole: an unreported reclaim is none")

	later := &embedopsv1.RealizedCache{ResolvedCommit: commit, ContentDigest: digest, FreeBytes: new(int64(1)), ReclaimableBytes: new(int64(1))}
	again := decision.MergeRealized(merged, later)
	g.Expect(again.FreeBytes).To(HaveValue(Equal(int64(1))), "the room follows the replicas' latest results")
	g.Expect(again.ReclaimableBytes).To(HaveValue(Equal(int64(1))))
	g.Expect(decision.MergeRealized(again, &embedopsv1.RealizedCache{ResolvedCommit: commit, ContentDigest: digest}).FreeBytes).
		To(HaveValue(Equal(int64(1))), "a record without a room keeps the recorded one")
}
