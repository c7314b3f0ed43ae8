package decision_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

// A revision needs its bytes, two 4 KiB blocks per file and 1 MiB; an
// uncounted one is taken to have MaxRealizedFiles files.
func TestRevisionNeedsHeadroomPerFileAndAMargin(t *testing.T) {
	g := NewWithT(t)
	g.Expect(decision.RevisionNeeds(decision.RevisionSize{Bytes: 1 << 30, Files: 3})).To(Equal(int64(1<<30 + 3*8<<10 + 1<<20)))
	g.Expect(decision.RevisionNeeds(decision.RevisionSize{Bytes: 1 << 30})).To(Equal(int64(1<<30 + 1000*8<<10 + 1<<20)))
	g.Expect(decision.UsableBytes(10<<30)).To(Equal(int64(10<<30-512<<20-320<<20)), "5 % reserved for root, 1/32 for inode tables and journal")
}

// The room rule: what the least roomy claim's populator reported, plus
// what pruning frees and a larger size adds, for the next revision with
// its headroom; without a report, both revisions within the usable bytes.
func TestRoomForRevision(t *testing.T) {
	room := func(bytes int64, files int, free, reclaimable *int64) *embedopsv1.RealizedCache {
		realized := &embedopsv1.RealizedCache{Bytes: new(bytes), FreeBytes: free, ReclaimableBytes: reclaimable}
		for range files {
			realized.Files = append(realized.Files, "file"+string(rune('a'+len(realized.Files))))
		}
		return realized
	}
	three := func(bytes int64) decision.RevisionSize { return decision.RevisionSize{Bytes: bytes, Files: 3} }
	cases := []struct {
		name     string
		realized *embedopsv1.RealizedCache
		size     string
		next     decision.RevisionSize
		fits     bool
	}{
		{"unknown bytes never fit", &embedopsv1.RealizedCache{}, "10Gi", three(1 << 30), false},
		{"an unknown next size never fits", room(1<<30, 3, new(int64(8<<30)), new(int64(0))), "10Gi", decision.RevisionSize{}, false},
		{"1Gi free and 3Gi reclaimable hold 4Gi of files but not their blocks and links",
			room(4<<30, 3, new(int64(1<<30)), new(int64(3<<30))), "10Gi", three(4 << 30), false},
		{"5 MiB more hold them", room(4<<30, 3, new(int64(1<<30)), new(int64(3<<30+5<<20))), "10Gi", three(4 << 30), true},
		{"an uncounted revision is taken to have 1000 files",
			room(4<<30, 3, new(int64(1<<30)), new(int64(3<<30+5<<20))), "10Gi", decision.RevisionSize{Bytes: 4 << 30}, false},
		{"a listed revision larger than the realized one", room(4<<30, 3, new(int64(1<<30)), new(int64(3<<30+5<<20))), "10Gi", three(5 << 30), false},
		{"a claim grown by 3Gi has 3Gi more room", room(4<<30, 3, new(int64(1<<30)), new(int64(3<<30))), "13Gi", three(5 << 30), true},
		{"free bytes alone: nothing to prune", room(4<<30, 3, new(int64(5<<30)), nil), "10Gi", three(4 << 30), true},
		{"no report: two 4.5Gi revisions fit in 10Gi's usable bytes", room(4608<<20, 3, nil, nil), "10Gi", three(4608 << 20), true},
		{"no report: two 5Gi revisions do not, reserved blocks and inode tables taken", room(5<<30, 3, nil, nil), "10Gi", three(5 << 30), false},
		{"no report: the listed size counts, not the realized one", room(4<<30, 3, nil, nil), "10Gi", three(5632 << 20), false},
		{"no report: a 5Gi revision beside a 4Gi one", room(4<<30, 3, nil, nil), "10Gi", three(5 << 30), true},
	}
	from, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("10Gi")))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize(tc.size)))
			g.Expect(err).NotTo(HaveOccurred())
			binding := recordingOf(from, "b")
			binding.Status.Realized = tc.realized
			g.Expect(decision.RoomForRevision(binding, d, tc.next)).To(Equal(tc.fits))
		})
	}
}

// Before the next revision is resolved it is taken to be as large as the
// realized one.
func TestRoomForAnotherRevisionTakesTheRealizedSize(t *testing.T) {
	g := NewWithT(t)
	d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("10Gi")))
	g.Expect(err).NotTo(HaveOccurred())
	binding := recordingOf(d, "b")
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeFalse(), "unknown bytes never fit")
	binding.Status.Realized = &embedopsv1.RealizedCache{Bytes: new(int64(4 << 30)), Files: []string{"a", "b", "c"},
		FreeBytes: new(int64(1 << 30)), ReclaimableBytes: new(int64(3<<30 + 5<<20))}
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeTrue())
	binding.Status.Realized.ReclaimableBytes = new(int64(3 << 30))
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeFalse())
}

// A binding out of room is used by no server and hands its storage to
// no successor.
func TestABindingOutOfRoomIsNeitherUsedNorSuperseded(t *testing.T) {
	g := NewWithT(t)
	d, err := decision.For(fixtures.EmbeddingServer("ns", "tei"))
	g.Expect(err).NotTo(HaveOccurred())
	uid := types.UID("server")
	binding := recordingOf(d, "b")
	binding.Status.Phase = embedopsv1.BindingActive
	binding.Status.RequestReferences = []embedopsv1.RequestReference{{Kind: embedopsv1.EmbeddingServerKind, Name: "tei", UID: uid}}
	g.Expect(decision.Usable(binding, d, uid)).To(BeTrue())
	g.Expect(decision.Supersedable(binding, uid)).To(BeTrue())
	meta.SetStatusCondition(&binding.Status.Conditions, metav1.Condition{Type: embedopsv1.OutOfRoomCondition, Status: metav1.ConditionTrue,
		Reason: embedopsv1.NoSpaceLeftReason, Message: "no space left"})
	g.Expect(decision.OutOfRoom(binding)).To(BeTrue())
	g.Expect(decision.Usable(binding, d, uid)).To(BeFalse(), "the server moves to storage of its own")
	g.Expect(decision.Reusable(binding, d)).To(BeFalse())
	g.Expect(decision.Supersedable(binding, uid)).To(BeFalse(), "its claims are what the server leaves")
}
