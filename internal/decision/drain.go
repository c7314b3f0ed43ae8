package decision

// OldSet is an old StatefulSet of a storage change, as the cache shows it.
type OldSet struct {
	Name string
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
	// GivesUp is how many replicas it gives up in this step.
	GivesUp int32
}

// DrainOld is what step does to each old StatefulSet, in old's order, one
// being deleted aside: scaled down to what the step lets it keep, and
// deleted only once it keeps none and its pods are gone, so a pod never
// outlives its StatefulSet (the disruption controller must find every
// pod's controller to allow an eviction: kubernetes v1.37.2
// pkg/controller/disruption/disruption.go, getExpectedScale and failSafe).
// An old StatefulSet is never scaled up.
func DrainOld(step RolloutStep, old []OldSet) []Drain {
	drains := make([]Drain, 0, len(old))
	for _, set := range old {
		if set.Deleting {
			continue
		}
		keep := step.Old[set.Name]
		drain := Drain{Name: set.Name}
		switch {
		case keep == 0 && set.Replicas == 0 && set.PodsGone:
			drain.Delete = true
		case keep < set.Replicas:
			drain.ScaleTo = new(keep)
			drain.GivesUp = set.Replicas - keep
		}
		drains = append(drains, drain)
	}
	return drains
}
