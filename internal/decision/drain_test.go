package decision_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/decision"
)

func TestDrainOldScalesDownAndDeletesOnlyOnceThePodsAreGone(t *testing.T) {
	step := decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"a": {Replicas: 1}, "b": {Replicas: 0}, "c": {Replicas: 0}, "d": {Replicas: 3}}}
	cases := []struct {
		name string
		old  decision.OldSet
		want []decision.Drain
	}{
		{"gives up what the step does not let it keep", decision.OldSet{Name: "a", Replicas: 3},
			[]decision.Drain{{Name: "a", ScaleTo: new(int32(1)), GivesUp: 2}}},
		{"keeping none, scales to zero while pods remain", decision.OldSet{Name: "b", Replicas: 1, PodsGone: true},
			[]decision.Drain{{Name: "b", ScaleTo: new(int32(0)), GivesUp: 1}}},
		{"at zero with pods left, waits for them", decision.OldSet{Name: "b", Replicas: 0},
			[]decision.Drain{{Name: "b"}}},
		{"at zero with its pods gone, is deleted", decision.OldSet{Name: "b", Replicas: 0, PodsGone: true},
			[]decision.Drain{{Name: "b", Delete: true}}},
		{"one the step does not name keeps none", decision.OldSet{Name: "e", Replicas: 2},
			[]decision.Drain{{Name: "e", ScaleTo: new(int32(0)), GivesUp: 2}}},
		{"is never scaled up", decision.OldSet{Name: "d", Replicas: 2},
			[]decision.Drain{{Name: "d"}}},
		{"one being deleted is left alone", decision.OldSet{Name: "c", Replicas: 0, PodsGone: true, Deleting: true},
			[]decision.Drain{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decision.DrainOld(step, []decision.OldSet{tc.old})).To(Equal(tc.want))
		})
	}
}

// The drains follow old's order, so the events and the inventory do.
func TestDrainOldKeepsTheOrderOfTheOldStatefulSets(t *testing.T) {
	step := decision.RolloutStep{Old: map[string]decision.Range{"z": {Replicas: 1}, "a": {Replicas: 0}}}
	drains := decision.DrainOld(step, []decision.OldSet{{Name: "z", Replicas: 2}, {Name: "a", Replicas: 1}})
	NewWithT(t).Expect(drains).To(Equal([]decision.Drain{
		{Name: "z", ScaleTo: new(int32(1)), GivesUp: 1},
		{Name: "a", ScaleTo: new(int32(0)), GivesUp: 1},
	}))
}

// A step that keeps higher ordinals raises spec.ordinals.start past the
// lowest ones, together with the replicas, and never lowers it.
func TestDrainOldRaisesTheStartPastTheOrdinalsThatGo(t *testing.T) {
	cases := []struct {
		name string
		keep decision.Range
		old  decision.OldSet
		want decision.Drain
	}{
		{"the lowest ordinal goes", decision.Range{Start: 1, Replicas: 1}, decision.OldSet{Name: "o", Replicas: 2},
			decision.Drain{Name: "o", ScaleTo: new(int32(1)), StartAt: new(int32(1)), GivesUp: 1}},
		{"both ends go", decision.Range{Start: 3, Replicas: 1}, decision.OldSet{Name: "o", Start: 2, Replicas: 3},
			decision.Drain{Name: "o", ScaleTo: new(int32(1)), StartAt: new(int32(3)), GivesUp: 2}},
		{"a range outside the set changes nothing", decision.Range{Start: 0, Replicas: 1}, decision.OldSet{Name: "o", Start: 1, Replicas: 2},
			decision.Drain{Name: "o"}},
		{"keeping none scales to zero wherever the start is", decision.Range{Start: 4}, decision.OldSet{Name: "o", Start: 1, Replicas: 2},
			decision.Drain{Name: "o", ScaleTo: new(int32(0)), GivesUp: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := decision.RolloutStep{Old: map[string]decision.Range{"o": tc.keep}}
			NewWithT(t).Expect(decision.DrainOld(step, []decision.OldSet{tc.old})).To(Equal([]decision.Drain{tc.want}))
		})
	}
}
