package decision_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

// The rules by which a new decision keeps its server's claims, as the
// ledger and `embedops plan` apply them.
func TestTakeoverKeepsTheClaimsOnlyWhenEveryRuleHolds(t *testing.T) {
	decide := func(options ...fixtures.Option) *decision.Decision {
		d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", options...))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return d
	}
	v1 := []fixtures.Option{fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithCacheSize("10Gi")}
	v2 := []fixtures.Option{fixtures.WithModel(fixtures.Model, "v2"), fixtures.WithCacheSize("10Gi")}
	realized := &embedopsv1.RealizedCache{Bytes: new(int64(4 << 30)), FreeBytes: new(int64(5 << 30)), ReclaimableBytes: new(int64(0))}
	full := &embedopsv1.RealizedCache{Bytes: new(int64(4 << 30)), FreeBytes: new(int64(1 << 30)), ReclaimableBytes: new(int64(0))}
	expands := func(e, known bool) func() (bool, bool) { return func() (bool, bool) { return e, known } }
	cases := []struct {
		name     string
		from     []fixtures.Option
		realized *embedopsv1.RealizedCache
		to       []fixtures.Option
		facts    decision.TakeoverFacts
		kind     decision.Succession
		unknown  int
	}{
		{"retainFor alone", v1, nil, append(v1, fixtures.WithRetainFor(time.Hour)), decision.TakeoverFacts{Replicas: 1},
			decision.RetainForSuccession, 0},
		{"a larger size on a class that expands", v1, nil, []fixtures.Option{fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithCacheSize("20Gi")},
			decision.TakeoverFacts{Replicas: 1, ClassExpands: expands(true, true)}, decision.GrowthSuccession, 0},
		{"a larger size on a class that does not expand", v1, nil, []fixtures.Option{fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithCacheSize("20Gi")},
			decision.TakeoverFacts{Replicas: 1, ClassExpands: expands(false, true)}, decision.NoSuccession, 0},
		{"a larger size on a class nobody can read", v1, nil, []fixtures.Option{fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithCacheSize("20Gi")},
			decision.TakeoverFacts{Replicas: 1}, decision.GrowthSuccession, 1},
		{"a smaller size", v1, nil, []fixtures.Option{fixtures.WithModel(fixtures.Model, "v1"), fixtures.WithCacheSize("5Gi")},
			decision.TakeoverFacts{Replicas: 1, ClassExpands: expands(true, true)}, decision.NoSuccession, 0},
		{"another model", v1, nil, []fixtures.Option{fixtures.WithModel("other/model", "v1"), fixtures.WithCacheSize("10Gi")},
			decision.TakeoverFacts{Replicas: 3, AllowedUnavailable: new(int32(1))}, decision.NoSuccession, 0},
		{"a revision with room, rolled one pod at a time", v1, realized, v2,
			decision.TakeoverFacts{Replicas: 3, AllowedUnavailable: new(int32(1))}, decision.RevisionSuccession, 0},
		{"a revision of a single replica", v1, realized, v2,
			decision.TakeoverFacts{Replicas: 1}, decision.NoSuccession, 0},
		{"a revision whose budget lets none go", v1, realized, v2,
			decision.TakeoverFacts{Replicas: 3, AllowedUnavailable: new(int32(0))}, decision.NoSuccession, 0},
		{"a revision whose budget is not known", v1, realized, v2,
			decision.TakeoverFacts{Replicas: 3}, decision.RevisionSuccession, 1},
		{"a revision on claims without room", v1, full, v2,
			decision.TakeoverFacts{Replicas: 3, AllowedUnavailable: new(int32(1))}, decision.NoSuccession, 0},
		{"a revision of a model whose size nobody recorded", v1, nil, v2,
			decision.TakeoverFacts{Replicas: 3, AllowedUnavailable: new(int32(1))}, decision.RevisionSuccession, 1},
		{"a revision and a larger size on a class that expands", v1, realized,
			[]fixtures.Option{fixtures.WithModel(fixtures.Model, "v2"), fixtures.WithCacheSize("20Gi")},
			decision.TakeoverFacts{Replicas: 3, AllowedUnavailable: new(int32(1)), ClassExpands: expands(true, true)}, decision.RevisionSuccession, 0},
		{"a revision and a larger size on a class that does not expand", v1, realized,
			[]fixtures.Option{fixtures.WithModel(fixtures.Model, "v2"), fixtures.WithCacheSize("20Gi")},
			decision.TakeoverFacts{Replicas: 3, AllowedUnavailable: new(int32(1)), ClassExpands: expands(false, true)}, decision.NoSuccession, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			from := recordingOf(decide(tc.from...), "b")
			from.Status.Realized = tc.realized
			kind, unknown := decision.Takeover(from, decide(tc.to...), tc.facts)
			g.Expect(kind).To(Equal(tc.kind))
			g.Expect(unknown).To(HaveLen(tc.unknown))
		})
	}
}

// The StorageClass is asked about only for a larger size: the ledger reads
// it then alone.
func TestTakeoverAsksTheStorageClassOnlyForALargerSize(t *testing.T) {
	g := NewWithT(t)
	d, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("10Gi")))
	g.Expect(err).NotTo(HaveOccurred())
	asked := 0
	facts := decision.TakeoverFacts{Replicas: 1, ClassExpands: func() (bool, bool) { asked++; return true, true }}
	longer, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("10Gi"), fixtures.WithRetainFor(time.Hour)))
	g.Expect(err).NotTo(HaveOccurred())
	decision.Takeover(recordingOf(d, "b"), longer, facts)
	g.Expect(asked).To(BeZero())
	larger, err := decision.For(fixtures.EmbeddingServer("ns", "tei", fixtures.WithCacheSize("20Gi")))
	g.Expect(err).NotTo(HaveOccurred())
	decision.Takeover(recordingOf(d, "b"), larger, facts)
	g.Expect(asked).To(Equal(1))
}
