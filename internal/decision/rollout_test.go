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

func TestPlanRolloutKeepsTheReadyPodsAtTheDesiredCount(t *testing.T) {
	old := func(name string, replicas, ready int32) decision.SetReplicas {
		return decision.SetReplicas{Name: name, Replicas: replicas, Ready: ready}
	}
	cases := []struct {
		name    string
		desired int32
		surge   int32
		next    decision.SetReplicas
		old     []decision.SetReplicas
		want    decision.RolloutStep
		done    bool
	}{
		{"starts one new pod beside three ready old ones", 3, 1, old("n", 0, 0), []decision.SetReplicas{old("o", 3, 3)},
			decision.RolloutStep{Next: 1, Old: map[string]int32{"o": 3}}, false},
		{"an old pod goes once a new one is ready", 3, 1, old("n", 1, 1), []decision.SetReplicas{old("o", 3, 3)},
			decision.RolloutStep{Next: 2, Old: map[string]int32{"o": 2}}, false},
		{"a new pod not ready yet keeps the old ones", 3, 1, old("n", 2, 1), []decision.SetReplicas{old("o", 2, 2)},
			decision.RolloutStep{Next: 2, Old: map[string]int32{"o": 2}}, false},
		{"the last old pod goes when all new ones are ready", 3, 1, old("n", 3, 3), []decision.SetReplicas{old("o", 1, 1)},
			decision.RolloutStep{Next: 3, Old: map[string]int32{"o": 0}}, true},
		{"a single replica surges first", 1, 1, old("n", 0, 0), []decision.SetReplicas{old("o", 1, 1)},
			decision.RolloutStep{Next: 1, Old: map[string]int32{"o": 1}}, false},
		{"a larger budget starts more pods at once", 4, 2, old("n", 0, 0), []decision.SetReplicas{old("o", 4, 4)},
			decision.RolloutStep{Next: 2, Old: map[string]int32{"o": 4}}, false},
		{"an old StatefulSet never scales up again", 3, 1, old("n", 2, 0), []decision.SetReplicas{old("o", 1, 1)},
			decision.RolloutStep{Next: 2, Old: map[string]int32{"o": 1}}, false},
		{"a newer change drains the half-filled one with fewer ready pods first", 3, 1, old("c", 0, 0),
			[]decision.SetReplicas{old("b", 2, 1), old("a", 2, 2)},
			decision.RolloutStep{Next: 1, Old: map[string]int32{"a": 2, "b": 1}}, false},
		{"scaled to zero, every old StatefulSet goes", 0, 1, old("n", 0, 0), []decision.SetReplicas{old("o", 3, 3)},
			decision.RolloutStep{Next: 0, Old: map[string]int32{"o": 0}}, true},
		{"a scale-down during the change caps the new StatefulSet", 2, 1, old("n", 3, 2), []decision.SetReplicas{old("o", 1, 1)},
			decision.RolloutStep{Next: 2, Old: map[string]int32{"o": 0}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			step := decision.PlanRollout(tc.desired, tc.surge, 1, tc.next, tc.old)
			g.Expect(step).To(Equal(tc.want))
			g.Expect(step.Done()).To(Equal(tc.done))
			ready := tc.next.Ready
			for _, o := range tc.old {
				ready += min(o.Ready, step.Old[o.Name])
			}
			g.Expect(ready).To(BeNumerically(">=", min(tc.desired, tc.next.Ready+totalReady(tc.old))),
				"the step takes away a ready pod that no new pod replaces")
		})
	}
}

// Without a surge the pods are replaced in place: an old pod goes before
// its successor starts, never more than the budget's unavailable at once,
// and the server never asks for more pods than its replicas.
func TestPlanRolloutWithoutASurgeReplacesInPlace(t *testing.T) {
	set := func(name string, replicas, ready int32) decision.SetReplicas {
		return decision.SetReplicas{Name: name, Replicas: replicas, Ready: ready}
	}
	cases := []struct {
		name        string
		desired     int32
		unavailable int32
		next        decision.SetReplicas
		old         []decision.SetReplicas
		want        decision.RolloutStep
	}{
		{"a single replica goes before its successor starts", 1, 0, set("n", 0, 0), []decision.SetReplicas{set("o", 1, 1)},
			decision.RolloutStep{Next: 1, Old: map[string]int32{"o": 0}}},
		{"three replicas give up one at a time", 3, 1, set("n", 0, 0), []decision.SetReplicas{set("o", 3, 3)},
			decision.RolloutStep{Next: 1, Old: map[string]int32{"o": 2}}},
		{"the next old pod goes once its successor is ready", 3, 1, set("n", 1, 1), []decision.SetReplicas{set("o", 2, 2)},
			decision.RolloutStep{Next: 2, Old: map[string]int32{"o": 1}}},
		{"a successor not ready yet holds the old ones", 3, 1, set("n", 1, 0), []decision.SetReplicas{set("o", 2, 2)},
			decision.RolloutStep{Next: 1, Old: map[string]int32{"o": 2}}},
		{"a larger budget replaces more at once", 4, 2, set("n", 0, 0), []decision.SetReplicas{set("o", 4, 4)},
			decision.RolloutStep{Next: 2, Old: map[string]int32{"o": 2}}},
		{"the last old pod goes", 3, 1, set("n", 2, 2), []decision.SetReplicas{set("o", 1, 1)},
			decision.RolloutStep{Next: 3, Old: map[string]int32{"o": 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			step := decision.PlanRollout(tc.desired, 0, tc.unavailable, tc.next, tc.old)
			g.Expect(step).To(Equal(tc.want))
			asked := step.Next
			for _, replicas := range step.Old {
				asked += replicas
			}
			g.Expect(asked).To(BeNumerically("<=", tc.desired), "no pod beyond the replicas")
			ready := tc.next.Ready
			for _, o := range tc.old {
				ready += min(o.Ready, step.Old[o.Name])
			}
			g.Expect(ready).To(BeNumerically(">=", tc.desired-max(tc.unavailable, 1)), "no more unavailable than the budget")
		})
	}
}

func totalReady(sets []decision.SetReplicas) int32 {
	var n int32
	for _, s := range sets {
		n += s.Ready
	}
	return n
}

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

func TestRoomForAnotherRevisionNeedsTwiceTheRealizedModel(t *testing.T) {
	g := NewWithT(t)
	d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("10Gi")))
	g.Expect(err).NotTo(HaveOccurred())
	binding := recordingOf(d, "b")
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeFalse(), "unknown bytes never fit")
	binding.Status.Realized = &embedopsv1.RealizedCache{Bytes: new(int64(5 << 30))}
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeTrue(), "two 5Gi revisions fit in 10Gi")
	binding.Status.Realized.Bytes = new(int64(6 << 30))
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeFalse(), "two 6Gi revisions do not")
}

func TestRoomForAnotherRevisionCountsWhatTheClaimsHaveFree(t *testing.T) {
	g := NewWithT(t)
	d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("10Gi")))
	g.Expect(err).NotTo(HaveOccurred())
	binding := recordingOf(d, "b")
	binding.Status.Realized = &embedopsv1.RealizedCache{Bytes: new(int64(4 << 30)), FreeBytes: new(int64(1 << 30)), ReclaimableBytes: new(int64(0))}
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeFalse(),
		"two 4Gi revisions fit in 10Gi nominally, but the claims have 1Gi free")
	binding.Status.Realized.ReclaimableBytes = new(int64(3 << 30))
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeFalse(),
		"1Gi free and 3Gi reclaimable fit 4Gi of files exactly, with no room for their blocks, links and manifest")
	binding.Status.Realized.ReclaimableBytes = new(int64(3<<30 + 60<<20))
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeTrue(), "pruning the older revision frees 3Gi and 60Mi more")
	binding.Status.Realized = &embedopsv1.RealizedCache{Bytes: new(int64(6 << 30)), FreeBytes: new(int64(3 << 30)), ReclaimableBytes: new(int64(1 << 30))}
	g.Expect(decision.RoomForAnotherRevision(binding, d)).To(BeFalse(), "4Gi of room for a 6Gi revision")
	grown, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("13Gi")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(decision.RoomForAnotherRevision(binding, grown)).To(BeTrue(), "a claim grown by 3Gi has 3Gi more room")
}
