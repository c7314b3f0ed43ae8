package decision

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// PodState is what one ordinal of a StatefulSet is doing, as its pod shows.
type PodState int

const (
	// PodReady is a pod whose Ready condition is True and that is not
	// terminating: it serves.
	PodReady PodState = iota
	// PodUnready is a running or starting pod that is not Ready.
	PodUnready
	// PodMissing is an ordinal the StatefulSet asks for with no pod (its
	// node died, or it is being created).
	PodMissing
	// PodTerminating is a pod with a deletionTimestamp.
	PodTerminating
)

// String names the state for messages.
func (s PodState) String() string {
	switch s {
	case PodReady:
		return "ready"
	case PodUnready:
		return "not ready"
	case PodMissing:
		return "missing"
	}
	return "terminating"
}

// SetReplicas are the replicas the new StatefulSet of a storage change asks
// for and has ready.
type SetReplicas struct {
	Name     string
	Replicas int32
	Ready    int32
}

// OldReplicas is an old StatefulSet of a storage change, ordinal by
// ordinal: Pods[i] is ordinal Start+i, one for each replica it asks for.
type OldReplicas struct {
	Name string
	// Start is spec.ordinals.start.
	Start int32
	Pods  []PodState
}

// ready is how many of the set's pods serve.
func (o OldReplicas) ready() int32 { return readyIn(o.Pods) }

// Range is the ordinals an old StatefulSet keeps: Start to
// Start+Replicas-1.
type Range struct {
	Start    int32
	Replicas int32
}

// RolloutStep is the next step of a storage change: the replicas the new
// StatefulSet asks for, the ordinals each old one keeps (Replicas 0:
// delete it), and, when the step holds back, on what.
type RolloutStep struct {
	Next int32
	Old  map[string]Range
	// Held is set when the step keeps old pods it wanted to give up,
	// because only ready ones could go and the budget allows no more
	// unavailable.
	Held *RolloutHold
}

// RolloutHold says why a storage change waits: the old pods that are not
// ready but cannot be removed before a ready one (a StatefulSet removes
// pods only at the ends of its ordinals), and the budget.
type RolloutHold struct {
	// Unready names the old pods that do not serve, "<set>-<ordinal> (state)".
	Unready []string
	// Ready is how many of the server's pods serve; MinReady how many
	// must (replicas less the allowed unavailable).
	Ready, MinReady int32
}

// Message says the hold for a condition or an event.
func (h *RolloutHold) Message() string {
	return fmt.Sprintf("waiting: %s; a StatefulSet removes pods only at the ends of its ordinals, "+
		"so the next old pod to go is a ready one, and %d ready pods are at or below the %d that must stay ready (replicas less the budget's maxUnavailable)",
		strings.Join(h.Unready, ", "), h.Ready, h.MinReady)
}

// Done reports whether no old StatefulSet keeps a replica.
func (s RolloutStep) Done() bool {
	for _, kept := range s.Old {
		if kept.Replicas > 0 {
			return false
		}
	}
	return true
}

// PlanRollout moves a server of desired replicas from its old
// StatefulSets to next, counting what is already down as a Deployment's
// rolling update does (kubernetes v1.37.2
// pkg/controller/deployment/rolling.go, reconcileOldReplicaSets: unhealthy
// old pods go first, cleanupUnhealthyReplicas; ready ones only as far as
// minAvailable = replicas - maxUnavailable allows). A StatefulSet removes
// the highest ordinal when scaled down and the lowest when
// spec.ordinals.start rises (stateful_set_control.go, processCondemned),
// so an old pod that does not serve goes first wherever it sits at an
// end, and a ready one goes only while the server keeps at least
// desired-unavailable ready pods (all of them while fewer are ready).
//
// With a surge (at least one) next starts up to surge pods beyond those
// ready, never more than desired, and the old ones keep as many as next
// lacks ready, those with more ready pods first. Without a surge (0), in
// place: the old ones give up to unavailable pods (at least one) beyond
// those next has ready, and next asks for what they gave up, so the server
// never asks for more than desired pods. The same observation always gives
// the same step; a newer storage change simply becomes next, and the
// half-filled StatefulSet of the previous one drains with the other old
// ones.
func PlanRollout(desired, surge, unavailable int32, next SetReplicas, old []OldReplicas) RolloutStep {
	desired = max(desired, 0)
	target := max(desired-next.Ready, 0)
	if surge <= 0 {
		unavailable = max(unavailable, 1)
		target = max(target-unavailable, 0)
	}
	ready := next.Ready
	for _, set := range old {
		ready += set.ready()
	}
	minReady := max(desired-unavailable, 0)
	kept, held := keepOld(target, max(ready-minReady, 0), old)
	step := RolloutStep{Old: make(map[string]Range, len(kept))}
	total := int32(0)
	for _, set := range kept {
		step.Old[set.Name] = Range{Start: set.Start, Replicas: int32(len(set.Pods))}
		total += int32(len(set.Pods))
	}
	if held {
		step.Held = &RolloutHold{Unready: unreadyPods(kept), Ready: ready, MinReady: minReady}
	}
	if surge <= 0 {
		step.Next = min(desired, max(next.Replicas, desired-total))
	} else {
		step.Next = min(desired, max(next.Replicas, next.Ready+surge))
	}
	return step
}

// keepOld is what the old StatefulSets keep of their ordinals: every pod
// that does not serve and sits at an end goes; then, while they keep more
// than target, ready pods go from the top of the sets with fewer ready
// pods first, at most mayTake of them. held reports that they still keep
// more than target for want of mayTake.
func keepOld(target, mayTake int32, old []OldReplicas) (kept []OldReplicas, held bool) {
	kept = make([]OldReplicas, 0, len(old))
	total := int32(0)
	for _, set := range old {
		set = trimUnready(set)
		kept = append(kept, set)
		total += int32(len(set.Pods))
	}
	slices.SortStableFunc(kept, func(a, b OldReplicas) int {
		return cmp.Or(cmp.Compare(a.ready(), b.ready()), cmp.Compare(b.Name, a.Name))
	})
	for i := range kept {
		for total > target && len(kept[i].Pods) > 0 && mayTake > 0 {
			kept[i].Pods = kept[i].Pods[:len(kept[i].Pods)-1]
			kept[i] = trimUnready(kept[i])
			total, mayTake = recount(kept), mayTake-1
		}
	}
	return kept, total > target
}

// trimUnready drops the pods that do not serve from both ends of a set's
// ordinals.
func trimUnready(set OldReplicas) OldReplicas {
	pods := set.Pods
	for len(pods) > 0 && pods[len(pods)-1] != PodReady {
		pods = pods[:len(pods)-1]
	}
	for len(pods) > 0 && pods[0] != PodReady {
		pods = pods[1:]
		set.Start++
	}
	set.Pods = pods
	return set
}

// recount is how many pods the sets keep.
func recount(sets []OldReplicas) int32 {
	total := int32(0)
	for _, set := range sets {
		total += int32(len(set.Pods))
	}
	return total
}

// readyIn is how many of pods serve.
func readyIn(pods []PodState) int32 {
	n := int32(0)
	for _, pod := range pods {
		if pod == PodReady {
			n++
		}
	}
	return n
}

// unreadyPods names the kept pods that do not serve, in name order.
func unreadyPods(sets []OldReplicas) []string {
	var names []string
	for _, set := range sets {
		for i, pod := range set.Pods {
			if pod != PodReady {
				names = append(names, fmt.Sprintf("pod %s-%d (%s)", set.Name, set.Start+int32(i), pod))
			}
		}
	}
	slices.Sort(names)
	return names
}
