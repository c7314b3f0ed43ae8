package decision

// OldSet is an old StatefulSet of a storage change, as the cache shows it.
type OldSet struct {
	Name string
	// Start is spec.ordinals.start.
	Start int32
	// Replicas is spec.replicas, defaulted to 1 as the API server does.
	Replicas int32
	// PodsGone: the StatefulSet controller, having seen the current spec,
	// counts no pod of it (status.replicas counts terminating pods too).
	PodsGone bool
	// Deleting: it has a deletionTimestamp.
	Deleting bool
}

// Drain is what one step of a storage change does to an old StatefulSet.
type Drain struct {
	Name string
	// Delete: it keeps no replica and its pods are gone.
	Delete bool
	// ScaleTo is the replicas it keeps, when fewer than it asks for now;
	// nil leaves it as it is.
	ScaleTo *int32
	// StartAt is the spec.ordinals.start that removes its lowest ordinals,
	// when the step keeps a higher first ordinal; nil leaves it.
	StartAt *int32
	// GivesUp is how many replicas it gives up in this step.
	GivesUp int32
}

// DrainOld is what step does to each old StatefulSet, in old's order, one
// being deleted aside: its ordinals cut to the range the step keeps
// (spec.ordinals.start raised past the lowest ones that go, spec.replicas
// lowered past the highest: kubernetes v1.37.2
// pkg/controller/statefulset/stateful_set_utils.go, getStartOrdinal and
// getEndOrdinal, and stateful_set_control.go, processCondemned, which
// deletes every pod outside them), and deleted only once it keeps none and
// its pods are gone, so a pod never outlives its StatefulSet (the
// disruption controller must find every pod's controller to allow an
// eviction: pkg/controller/disruption/disruption.go, getExpectedScale and
// failSafe). An old StatefulSet is never scaled up, nor its start lowered.
func DrainOld(step RolloutStep, old []OldSet) []Drain {
	drains := make([]Drain, 0, len(old))
	for _, set := range old {
		if set.Deleting {
			continue
		}
		keep := step.Old[set.Name]
		drain := Drain{Name: set.Name}
		switch {
		case keep.Replicas == 0 && set.Replicas == 0 && set.PodsGone:
			drain.Delete = true
		case keep.Replicas == 0 && set.Replicas > 0:
			drain.ScaleTo, drain.GivesUp = new(int32(0)), set.Replicas
		case keep.Replicas > 0 && keep.Replicas < set.Replicas && keep.Start >= set.Start && keep.Start+keep.Replicas <= set.Start+set.Replicas:
			drain.ScaleTo, drain.GivesUp = new(keep.Replicas), set.Replicas-keep.Replicas
			if keep.Start > set.Start {
				drain.StartAt = new(keep.Start)
			}
		}
		drains = append(drains, drain)
	}
	return drains
}
