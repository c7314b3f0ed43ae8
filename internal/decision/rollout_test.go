package decision_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

func TestRolloutStatefulSetNameFitsThePodsLabels(t *testing.T) {
	g := NewWithT(t)
	g.Expect(decision.RolloutStatefulSetName("tei", "bge-abc")).To(MatchRegexp(`^tei-[0-9a-f]{6}$`))
	g.Expect(decision.RolloutStatefulSetName("tei", "bge-abc")).To(Equal(decision.RolloutStatefulSetName("tei", "bge-abc")))
	g.Expect(decision.RolloutStatefulSetName("tei", "bge-abc")).NotTo(Equal(decision.RolloutStatefulSetName("tei", "bge-abd")))
	long := decision.RolloutStatefulSetName(strings.Repeat("a", 52), "bge-abc")
	// controller-revision-hash is "<statefulset>-<10 characters>", a label
	// value of at most 63.
	g.Expect(len(long) + 11).To(BeNumerically("<=", 63))
}

func TestRolloutStatefulSetNamesOfferDistinctNamesFirstTheUsualOne(t *testing.T) {
	g := NewWithT(t)
	names := decision.RolloutStatefulSetNames("tei", "bge-abc")
	g.Expect(names[0]).To(Equal(decision.RolloutStatefulSetName("tei", "bge-abc")))
	g.Expect(len(names)).To(BeNumerically(">", 1))
	seen := map[string]bool{}
	for _, name := range names {
		g.Expect(name).To(MatchRegexp(`^tei-[0-9a-f]{6}$`))
		g.Expect(seen).NotTo(HaveKey(name))
		seen[name] = true
	}
	g.Expect(decision.RolloutStatefulSetNames("tei", "bge-abc")).To(Equal(names), "the same storage always gets the same names")
}

func TestWhyNewStorageNamesTheFirstDifference(t *testing.T) {
	g := NewWithT(t)
	base := func(mutate ...fixtures.Option) *decision.Decision {
		d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", mutate...))
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}
	old := base(fixtures.WithCacheSize("10Gi"))
	g.Expect(decision.WhyNewStorage(old, base(fixtures.WithCacheSize("5Gi")))).To(Equal("size 5Gi is below 10Gi, and a claim cannot shrink"))
	g.Expect(decision.WhyNewStorage(old, base(fixtures.WithCacheSize("20Gi")))).To(HavePrefix("size 20Gi replaces 10Gi, and the claims cannot grow in place"))
	g.Expect(decision.WhyNewStorage(old, base(fixtures.WithCacheSize("10Gi"), fixtures.WithStorageClass("fast")))).To(Equal(`StorageClass "fast" replaces ""`))
	g.Expect(decision.WhyNewStorage(old, base(fixtures.WithCacheSize("10Gi"), fixtures.WithCacheMode(embedopsv1.CacheModeShared)))).To(Equal("cache mode Shared replaces PerReplica"))
}

func TestGrowsInPlaceOnlyForALargerSizeOfTheSameStorage(t *testing.T) {
	g := NewWithT(t)
	decide := func(options ...fixtures.Option) *decision.Decision {
		d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", options...))
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}
	recorded := recordingOf(decide(fixtures.WithCacheSize("10Gi")), "b")
	g.Expect(decision.GrowsInPlace(recorded, decide(fixtures.WithCacheSize("20Gi")))).To(BeTrue())
	g.Expect(decision.GrowsInPlace(recorded, decide(fixtures.WithCacheSize("20Gi"), fixtures.WithRetainFor(time.Minute)))).To(BeTrue(), "retainFor may change with it")
	g.Expect(decision.GrowsInPlace(recorded, decide(fixtures.WithCacheSize("10Gi")))).To(BeFalse(), "the same size is not growth")
	g.Expect(decision.GrowsInPlace(recorded, decide(fixtures.WithCacheSize("5Gi")))).To(BeFalse(), "a claim cannot shrink")
	g.Expect(decision.GrowsInPlace(recorded, decide(fixtures.WithCacheSize("20Gi"), fixtures.WithStorageClass("fast")))).To(BeFalse())
	g.Expect(decision.GrowsInPlace(recorded, decide(fixtures.WithCacheSize("20Gi"), fixtures.WithModel("other/model", "")))).To(BeFalse())
}

func TestRevisesInPlaceOnlyAPerReplicaRevisionOfTheSameStorage(t *testing.T) {
	g := NewWithT(t)
	decide := func(options ...fixtures.Option) *decision.Decision {
		d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", options...))
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}
	recorded := recordingOf(decide(fixtures.WithModel(fixtures.Model, "v1")), "b")
	g.Expect(decision.RevisesInPlace(recorded, decide(fixtures.WithModel(fixtures.Model, "v2")))).To(BeTrue())
	g.Expect(decision.RevisesInPlace(recorded, decide(fixtures.WithModel(fixtures.Model, "v2"), fixtures.WithRetainFor(time.Minute)))).To(BeTrue())
	g.Expect(decision.RevisesInPlace(recorded, decide(fixtures.WithModel(fixtures.Model, "v1")))).To(BeFalse(), "the same revision is not a revision change")
	g.Expect(decision.RevisesInPlace(recorded, decide(fixtures.WithModel("other/model", "v2")))).To(BeFalse(), "another model needs other storage")
	g.Expect(decision.RevisesInPlace(recorded, decide(fixtures.WithModel(fixtures.Model, "v2"), fixtures.WithStorageClass("fast")))).To(BeFalse())
	shared := recordingOf(decide(fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithCacheMode(embedopsv1.CacheModeShared)), "s")
	g.Expect(decision.RevisesInPlace(shared, decide(fixtures.WithModel(fixtures.Model, "v2"), fixtures.WithCacheMode(embedopsv1.CacheModeShared)))).To(BeFalse(),
		"a Shared claim other servers may read is not rewritten for one")
	g.Expect(decision.InPlaceRollAllowed(1, 1)).To(BeFalse(), "a single replica surges")
	g.Expect(decision.InPlaceRollAllowed(3, 0)).To(BeFalse(), "a budget of none surges")
	g.Expect(decision.InPlaceRollAllowed(3, 1)).To(BeTrue())
}
