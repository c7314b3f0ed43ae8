package decision_test

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

func TestPlanPredictsTheSuccessionsTheLedgerMakes(t *testing.T) {
	es := func(options ...fixtures.Option) *embedopsv1.EmbeddingServer {
		return fixtures.EmbeddingServer("ns", "a", append([]fixtures.Option{fixtures.WithStorageClass("fast"), fixtures.WithReplicas(2)}, options...)...)
	}
	realized := func(bytes int64) []embedopsv1.ModelCacheBinding {
		b := recordingOf(decisionOf(t, es()), "realized")
		b.Status.Realized = &embedopsv1.RealizedCache{Bytes: new(bytes)}
		return []embedopsv1.ModelCacheBinding{*b}
	}
	withRoom := func(bytes, free, reclaimable int64) decision.Facts {
		bindings := realized(bytes)
		bindings[0].Status.Realized.FreeBytes, bindings[0].Status.Realized.ReclaimableBytes = new(free), new(reclaimable)
		return decision.Facts{Bindings: bindings, AllowedUnavailable: builder.AllowedUnavailable}
	}
	expandable := func(class string) (bool, bool) { return class == "fast", true }
	known := decision.Facts{Bindings: realized(4 << 30), ClassExpands: expandable, AllowedUnavailable: builder.AllowedUnavailable}
	larger, v2 := fixtures.WithCacheSize("20Gi"), fixtures.WithModel(fixtures.Model, "v2")
	created := []decision.Action{decision.ActionCreate, decision.ActionRetire}
	cases := []struct {
		name      string
		from, to  *embedopsv1.EmbeddingServer
		facts     decision.Facts
		actions   []decision.Action
		condition string
	}{
		{"a larger size on an expandable class is expanded in place", es(), es(larger), known, []decision.Action{decision.ActionKeepExpanded}, ""},
		{"a larger size on a class that does not expand gets new storage", es(fixtures.WithStorageClass("slow")),
			es(fixtures.WithStorageClass("slow"), larger), known, created, ""},
		{"a larger size on a class not known is expanded if it expands", es(), es(larger), decision.Facts{},
			[]decision.Action{decision.ActionKeepExpanded}, `if StorageClass "fast" allows volume expansion; otherwise new storage`},
		{"a smaller size gets new storage", es(larger), es(), known, created, ""},
		{"a new revision rolls in place", es(), es(v2), known, []decision.Action{decision.ActionKeepRevised}, ""},
		{"a new revision and a larger size on an expandable class", es(), es(v2, larger), known, []decision.Action{decision.ActionKeepRevised}, ""},
		{"a new revision of one replica gets new storage", es(fixtures.WithReplicas(1)), es(v2, fixtures.WithReplicas(1)), known, created, ""},
		{"a new revision without room for two gets new storage", es(), es(v2),
			decision.Facts{Bindings: realized(6 << 30), AllowedUnavailable: builder.AllowedUnavailable}, created, ""},
		{"a new revision of a model of unknown size rolls in place if it fits", es(), es(v2),
			decision.Facts{AllowedUnavailable: builder.AllowedUnavailable}, []decision.Action{decision.ActionKeepRevised}, "the claims have room for another revision"},
		{"a new revision gets new storage when the claims lack the room they reported, though twice the model fits the size", es(), es(v2),
			withRoom(4<<30, 1<<30, 2<<30), created, ""},
		{"a new revision rolls in place into the room the claims reported, though twice the model exceeds the size", es(), es(v2),
			withRoom(6<<30, 3<<30, 4<<30), []decision.Action{decision.ActionKeepRevised}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan, err := decision.NewPlan(servers(tc.from), servers(tc.to), tc.facts)
			g.Expect(err).NotTo(HaveOccurred())
			change := changeOf(g, plan, "ns/a")
			g.Expect(actions(change)).To(Equal(tc.actions))
			succeeds := len(tc.actions) == 1
			g.Expect(change.Rolls).To(Equal(!succeeds), "a successor keeps the claims")
			if !succeeds {
				return
			}
			g.Expect(change.Caches[0].Supersedes).To(Equal(decision.BindingName(decisionOf(t, tc.from))))
			if tc.condition == "" {
				g.Expect(change.Caches[0].Condition).To(BeEmpty())
			} else {
				g.Expect(change.Caches[0].Condition).To(ContainSubstring(tc.condition))
			}
		})
	}
}
