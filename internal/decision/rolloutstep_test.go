package decision_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/decision"
)

func TestPlanRolloutKeepsTheReadyPodsAtTheDesiredCount(t *testing.T) {
	cases := []struct {
		name    string
		desired int32
		surge   int32
		next    decision.SetReplicas
		old     []decision.OldReplicas
		want    decision.RolloutStep
		done    bool
	}{
		{"starts one new pod beside three ready old ones", 3, 1, newPods("n", 0, 0), []decision.OldReplicas{oldPods("o", 3, 3)},
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Replicas: 3}}}, false},
		{"an old pod goes once a new one is ready", 3, 1, newPods("n", 1, 1), []decision.OldReplicas{oldPods("o", 3, 3)},
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Replicas: 2}}}, false},
		{"a new pod not ready yet keeps the old ones", 3, 1, newPods("n", 2, 1), []decision.OldReplicas{oldPods("o", 2, 2)},
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Replicas: 2}}}, false},
		{"the last old pod goes when all new ones are ready", 3, 1, newPods("n", 3, 3), []decision.OldReplicas{oldPods("o", 1, 1)},
			decision.RolloutStep{Next: 3, Old: map[string]decision.Range{"o": {Replicas: 0}}}, true},
		{"a single replica surges first", 1, 1, newPods("n", 0, 0), []decision.OldReplicas{oldPods("o", 1, 1)},
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Replicas: 1}}}, false},
		{"a larger budget starts more pods at once", 4, 2, newPods("n", 0, 0), []decision.OldReplicas{oldPods("o", 4, 4)},
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Replicas: 4}}}, false},
		{"an old StatefulSet never scales up again", 3, 1, newPods("n", 2, 0), []decision.OldReplicas{oldPods("o", 1, 1)},
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Replicas: 1}}}, false},
		{"a newer change drains the half-filled one with fewer ready pods first", 3, 1, newPods("c", 0, 0),
			[]decision.OldReplicas{oldPods("b", 2, 1), oldPods("a", 2, 2)},
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"a": {Replicas: 2}, "b": {Replicas: 1}}}, false},
		{"scaled to zero, every old StatefulSet goes", 0, 1, newPods("n", 0, 0), []decision.OldReplicas{oldPods("o", 3, 3)},
			decision.RolloutStep{Next: 0, Old: map[string]decision.Range{"o": {Replicas: 0}}}, true},
		{"a scale-down during the change caps the new StatefulSet", 2, 1, newPods("n", 3, 2), []decision.OldReplicas{oldPods("o", 1, 1)},
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Replicas: 0}}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			step := decision.PlanRollout(tc.desired, tc.surge, 1, tc.next, tc.old)
			g.Expect(step).To(Equal(tc.want))
			g.Expect(step.Done()).To(Equal(tc.done))
			ready := tc.next.Ready
			for _, o := range tc.old {
				ready += readyKept(o, step.Old[o.Name])
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
	cases := []struct {
		name        string
		desired     int32
		unavailable int32
		next        decision.SetReplicas
		old         []decision.OldReplicas
		want        decision.RolloutStep
	}{
		{"a single replica goes before its successor starts", 1, 0, newPods("n", 0, 0), []decision.OldReplicas{oldPods("o", 1, 1)},
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Replicas: 0}}}},
		{"three replicas give up one at a time", 3, 1, newPods("n", 0, 0), []decision.OldReplicas{oldPods("o", 3, 3)},
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Replicas: 2}}}},
		{"the next old pod goes once its successor is ready", 3, 1, newPods("n", 1, 1), []decision.OldReplicas{oldPods("o", 2, 2)},
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Replicas: 1}}}},
		{"a successor not ready yet holds the old ones", 3, 1, newPods("n", 1, 0), []decision.OldReplicas{oldPods("o", 2, 2)},
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Replicas: 2}}}},
		{"a larger budget replaces more at once", 4, 2, newPods("n", 0, 0), []decision.OldReplicas{oldPods("o", 4, 4)},
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Replicas: 2}}}},
		{"the last old pod goes", 3, 1, newPods("n", 2, 2), []decision.OldReplicas{oldPods("o", 1, 1)},
			decision.RolloutStep{Next: 3, Old: map[string]decision.Range{"o": {Replicas: 0}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			step := decision.PlanRollout(tc.desired, 0, tc.unavailable, tc.next, tc.old)
			g.Expect(step).To(Equal(tc.want))
			asked := step.Next
			for _, kept := range step.Old {
				asked += kept.Replicas
			}
			g.Expect(asked).To(BeNumerically("<=", tc.desired), "no pod beyond the replicas")
			ready := tc.next.Ready
			for _, o := range tc.old {
				ready += readyKept(o, step.Old[o.Name])
			}
			g.Expect(ready).To(BeNumerically(">=", tc.desired-max(tc.unavailable, 1)), "no more unavailable than the budget")
		})
	}
}

func totalReady(sets []decision.OldReplicas) int32 {
	var n int32
	for _, s := range sets {
		n += readyKept(s, decision.Range{Start: s.Start, Replicas: int32(len(s.Pods))})
	}
	return n
}

// newPods is the new StatefulSet of a storage change.
func newPods(name string, replicas, ready int32) decision.SetReplicas {
	return decision.SetReplicas{Name: name, Replicas: replicas, Ready: ready}
}

// oldPods is an old StatefulSet whose lowest ready ordinals are ready and
// the rest not.
func oldPods(name string, replicas, ready int32) decision.OldReplicas {
	set := decision.OldReplicas{Name: name}
	for i := range replicas {
		set.Pods = append(set.Pods, map[bool]decision.PodState{true: decision.PodReady, false: decision.PodUnready}[i < ready])
	}
	return set
}

// readyKept is how many of set's ready pods lie in kept.
func readyKept(set decision.OldReplicas, kept decision.Range) int32 {
	n := int32(0)
	for i, pod := range set.Pods {
		ordinal := set.Start + int32(i)
		if pod == decision.PodReady && ordinal >= kept.Start && ordinal < kept.Start+kept.Replicas {
			n++
		}
	}
	return n
}

// An old pod that does not serve goes before a ready one wherever it sits
// at an end of its StatefulSet's ordinals; in the middle it holds the
// change while the budget allows no ready pod to go, and the hold names it.
func TestPlanRolloutReplacesWhatIsDownFirst(t *testing.T) {
	const (
		R = decision.PodReady
		U = decision.PodUnready
		M = decision.PodMissing
		T = decision.PodTerminating
	)
	set := func(pods ...decision.PodState) []decision.OldReplicas {
		return []decision.OldReplicas{{Name: "o", Pods: pods}}
	}
	cases := []struct {
		name        string
		desired     int32
		surge       int32
		unavailable int32
		next        decision.SetReplicas
		old         []decision.OldReplicas
		want        decision.RolloutStep
	}{
		{"in place, the unready lowest ordinal goes, not the serving highest", 2, 0, 0, newPods("n", 0, 0), set(U, R),
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Start: 1, Replicas: 1}}}},
		{"in place, an unready highest ordinal goes by scaling down", 2, 0, 0, newPods("n", 0, 0), set(R, U),
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Start: 0, Replicas: 1}}}},
		{"in place, every pod that does not serve at an end goes at once", 4, 0, 1, newPods("n", 0, 0), set(M, R, R, T),
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Start: 1, Replicas: 2}}}},
		{"in place, an unready middle ordinal holds the change at the budget", 3, 0, 1, newPods("n", 0, 0), set(R, U, R),
			decision.RolloutStep{Next: 0, Old: map[string]decision.Range{"o": {Start: 0, Replicas: 3}}, Held: &decision.RolloutHold{
				Unready: []string{"pod o-1 (not ready)"}, Ready: 2, MinReady: 2}}},
		{"with a surge, the unready old pod goes and the new one starts", 2, 1, 0, newPods("n", 0, 0), set(U, R),
			decision.RolloutStep{Next: 1, Old: map[string]decision.Range{"o": {Start: 1, Replicas: 1}}}},
		{"with a surge, a ready new pod replaces a ready old one only", 2, 1, 0, newPods("n", 1, 1), set(R, U, R),
			decision.RolloutStep{Next: 2, Old: map[string]decision.Range{"o": {Start: 0, Replicas: 1}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decision.PlanRollout(tc.desired, tc.surge, tc.unavailable, tc.next, tc.old)).To(Equal(tc.want))
		})
	}
}

// podStates are the states an ordinal may be in.
var podStates = []decision.PodState{decision.PodReady, decision.PodUnready, decision.PodMissing, decision.PodTerminating}

// everyOrdinalState calls f with every sequence of up to n pod states.
func everyOrdinalState(n int, f func([]decision.PodState)) {
	var walk func(prefix []decision.PodState)
	walk = func(prefix []decision.PodState) {
		f(prefix)
		if len(prefix) == n {
			return
		}
		for _, state := range podStates {
			walk(append(prefix[:len(prefix):len(prefix)], state))
		}
	}
	walk(nil)
}

// rolloutInput is one observation a storage change's step is planned from.
type rolloutInput struct {
	desired, surge, unavailable int32
	next                        decision.SetReplicas
	old                         []decision.OldReplicas
}

// everyRolloutInput calls f with every observation of 1-4 replicas,
// maxSurge 0 and 1, maxUnavailable 0 and 1, a new StatefulSet at every
// replica and ready count, and one old StatefulSet (starting at ordinal 0
// or 1) or two, each ordinal ready, unready, missing or terminating.
func everyRolloutInput(f func(rolloutInput)) {
	for desired := int32(1); desired <= 4; desired++ {
		for surge := int32(0); surge <= 1; surge++ {
			for unavailable := int32(0); unavailable <= 1; unavailable++ {
				for replicas := int32(0); replicas <= desired; replicas++ {
					for ready := int32(0); ready <= replicas; ready++ {
						in := rolloutInput{desired: desired, surge: surge, unavailable: unavailable, next: newPods("n", replicas, ready)}
						everyOldSet(int(desired), func(old []decision.OldReplicas) {
							in.old = old
							f(in)
						})
					}
				}
			}
		}
	}
}

// everyOldSet calls f with one old StatefulSet of up to n ordinals, from
// ordinal 0 or 1, and with two of up to two ordinals each.
func everyOldSet(n int, f func([]decision.OldReplicas)) {
	everyOrdinalState(n, func(pods []decision.PodState) {
		for start := int32(0); start <= 1; start++ {
			f([]decision.OldReplicas{{Name: "a", Start: start, Pods: pods}})
		}
	})
	everyOrdinalState(2, func(a []decision.PodState) {
		everyOrdinalState(2, func(b []decision.PodState) {
			f([]decision.OldReplicas{{Name: "a", Pods: a}, {Name: "b", Pods: b}})
		})
	})
}

// Every step of every observation keeps what the issue asks of a rollout
// on a degraded cluster: no ready pod goes while the server has
// replicas-maxUnavailable ready or fewer (maxUnavailable at least one in
// place), a ready old pod goes only once no old pod that does not serve
// is left at an end of its ordinals, a hold names the pods it waits on,
// the old StatefulSets only shrink, DrainOld cuts them to exactly the
// ordinals kept, and in place the server never asks for more pods than
// its replicas.
func TestPlanRolloutNeverTakesAReadyPodBelowTheBudget(t *testing.T) {
	inputs := 0
	everyRolloutInput(func(in rolloutInput) {
		inputs++
		step := decision.PlanRollout(in.desired, in.surge, in.unavailable, in.next, in.old)
		if why := rolloutStepViolation(in, step); why != "" {
			t.Fatalf("%s\ninput: desired %d, surge %d, unavailable %d, next %+v, old %+v\nstep: %+v held %+v",
				why, in.desired, in.surge, in.unavailable, in.next, in.old, step, step.Held)
		}
	})
	NewWithT(t).Expect(inputs).To(BeNumerically(">", 100000), "the enumeration covers the inputs")
}

// rolloutStepViolation says which rule step breaks, "" when none.
func rolloutStepViolation(in rolloutInput, step decision.RolloutStep) string {
	unavailable := in.unavailable
	if in.surge == 0 {
		unavailable = max(unavailable, 1)
	}
	minReady := max(in.desired-unavailable, 0)
	readyNow, readyAfter, kept := in.next.Ready, in.next.Ready, int32(0)
	tookReady, unreadyAtAnEnd := false, false
	for _, set := range in.old {
		keep := step.Old[set.Name]
		if keep.Replicas > 0 && (keep.Start < set.Start || keep.Start+keep.Replicas > set.Start+int32(len(set.Pods))) {
			return "an old StatefulSet keeps ordinals it does not have"
		}
		all := readyKept(set, decision.Range{Start: set.Start, Replicas: int32(len(set.Pods))})
		readyNow += all
		readyAfter += readyKept(set, keep)
		tookReady = tookReady || readyKept(set, keep) < all
		kept += keep.Replicas
		if keep.Replicas > 0 {
			first, last := set.Pods[keep.Start-set.Start], set.Pods[keep.Start-set.Start+keep.Replicas-1]
			unreadyAtAnEnd = unreadyAtAnEnd || first != decision.PodReady || last != decision.PodReady
		}
		if why := drainViolation(set, step); why != "" {
			return why
		}
	}
	switch {
	case readyAfter < min(readyNow, minReady):
		return "a ready pod goes below the budget"
	case tookReady && unreadyAtAnEnd:
		return "a ready pod goes while a pod that does not serve is left at an end"
	case step.Held != nil && len(step.Held.Unready) == 0:
		return "a hold names no pod"
	case step.Next > in.desired:
		return "the new StatefulSet asks for more than the replicas"
	case in.surge == 0 && step.Next > max(in.next.Replicas, in.desired-kept):
		return "in place, the server asks for more pods than its replicas"
	}
	return ""
}

// drainViolation says how DrainOld fails to cut set to the step's
// ordinals, "" when it does.
func drainViolation(set decision.OldReplicas, step decision.RolloutStep) string {
	replicas := int32(len(set.Pods))
	drains := decision.DrainOld(step, []decision.OldSet{{Name: set.Name, Start: set.Start, Replicas: replicas}})
	if len(drains) != 1 {
		return "DrainOld skips a StatefulSet"
	}
	start, after := set.Start, replicas
	if drains[0].StartAt != nil {
		start = *drains[0].StartAt
	}
	if drains[0].ScaleTo != nil {
		after = *drains[0].ScaleTo
	}
	keep := step.Old[set.Name]
	if after != keep.Replicas || (after > 0 && start != keep.Start) {
		return "DrainOld does not cut the StatefulSet to the ordinals kept"
	}
	return ""
}
