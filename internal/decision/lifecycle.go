package decision

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// IdleAction is what an Active binding's references call for.
type IdleAction int

const (
	// StayActive means the binding is in use and not marked idle.
	StayActive IdleAction = iota
	// StartIdle means no references and no idle window yet.
	StartIdle
	// EndIdle means references are back while an idle window is recorded.
	EndIdle
	// WaitIdle means idle, retireAfter is still ahead.
	WaitIdle
	// RetireNow means idle and retireAfter has passed, or the binding is being
	// deleted and nothing references it.
	RetireNow
)

// ActiveAction decides what to do with an Active binding at now. A binding
// being deleted (kubectl delete, a namespace going away) that nothing
// references retires at once: its deleter asked for the data to go, and
// waiting for retainFor would hold the deletion for that long.
func ActiveAction(binding *embedopsv1.ModelCacheBinding, now time.Time) IdleAction {
	referenced := len(binding.Status.RequestReferences) > 0
	idle := binding.Status.IdleSince != nil || binding.Status.RetireAfter != nil
	switch {
	case referenced && idle:
		return EndIdle
	case referenced:
		return StayActive
	case !binding.DeletionTimestamp.IsZero():
		return RetireNow
	case binding.Status.IdleSince == nil || binding.Status.RetireAfter == nil:
		return StartIdle
	case !now.Before(binding.Status.RetireAfter.Time):
		return RetireNow
	default:
		return WaitIdle
	}
}

// UntilRetirement is how long an idle binding waits before it may retire.
func UntilRetirement(binding *embedopsv1.ModelCacheBinding, now time.Time) time.Duration {
	if binding.Status.RetireAfter == nil {
		return 0
	}
	return max(binding.Status.RetireAfter.Sub(now), 0)
}

// Prunable are the Released bindings beyond the newest limit, oldest first.
// releasedAt has a resolution of one second, and a server moving quickly
// releases several bindings within one, so ties go to the resourceVersion
// (k8s.io/apimachinery/pkg/util/resourceversion): a Released record is last
// written when it is released.
func Prunable(bindings []embedopsv1.ModelCacheBinding, limit int) []embedopsv1.ModelCacheBinding {
	var released []embedopsv1.ModelCacheBinding
	for _, b := range bindings {
		if b.Status.Phase == embedopsv1.BindingReleased && b.DeletionTimestamp.IsZero() {
			released = append(released, b)
		}
	}
	if len(released) <= limit {
		return nil
	}
	slices.SortStableFunc(released, func(a, b embedopsv1.ModelCacheBinding) int {
		if c := releasedTime(a).Compare(releasedTime(b)); c != 0 {
			return c
		}
		c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion)
		if err != nil {
			return 0
		}
		return c
	})
	return released[:len(released)-limit]
}

// releasedTime is when a binding was Released, or created if unrecorded.
func releasedTime(binding embedopsv1.ModelCacheBinding) time.Time {
	if binding.Status.ReleasedAt != nil {
		return binding.Status.ReleasedAt.Time
	}
	return binding.CreationTimestamp.Time
}
