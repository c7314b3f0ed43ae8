package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// sample is one state of a binding, at its resourceVersion.
type sample struct {
	rv      uint64
	phase   embedopsv1.BindingPhase
	claims  []string
	refs    int
	deleted bool
	// unseen: the binding was found gone after a watch gap; its last
	// phase is unknown.
	unseen bool
}

// sampleOf records a binding as seen at rv.
func sampleOf(binding *embedopsv1.ModelCacheBinding, rv uint64, deleted bool) sample {
	phase := binding.Status.Phase
	if phase == "" {
		phase = embedopsv1.BindingActive
	}
	return sample{rv: rv, phase: phase, claims: slices.Clone(binding.Spec.Resources.PersistentVolumeClaimNames),
		refs: len(binding.Status.RequestReferences), deleted: deleted}
}

// active reports whether the binding was Active in this state.
func (s sample) active() bool { return !s.unseen && s.phase == embedopsv1.BindingActive }

// bindingHistory is every state a binding was seen in, by resourceVersion.
type bindingHistory struct {
	name    string
	samples []sample
}

// add inserts s in resourceVersion order, once.
func (h *bindingHistory) add(s sample) {
	i, found := slices.BinarySearchFunc(h.samples, s.rv, func(x sample, rv uint64) int { return cmp.Compare(x.rv, rv) })
	if !found {
		h.samples = slices.Insert(h.samples, i, s)
	}
}

// gone reports whether the binding was seen deleted.
func (h *bindingHistory) gone() bool {
	return len(h.samples) > 0 && h.samples[len(h.samples)-1].deleted
}

// verdict is what the history says about a binding at one resourceVersion.
type verdict int

const (
	// unrelated: no state before then lists the claim.
	unrelated verdict = iota
	// notActive: the binding was Retiring or Released.
	notActive
	// wasActive: the binding was Active.
	wasActive
	// unknown: a watch gap hides when the binding stopped being Active.
	unknown
)

// activeAt judges the binding at rv for the claim named claim. Phases only
// move Active -> Retiring -> Released, so the binding was Active at rv when
// a later state is Active, or when the first later state is not Active and
// no watch gap separates it from the last earlier, Active, state: that
// later state is then the write that ended Active.
func (h *bindingHistory) activeAt(rv uint64, claim string, gaps []gap) verdict {
	var before, after *sample
	for i := range h.samples {
		switch s := &h.samples[i]; {
		case s.rv < rv:
			before = s
		case after == nil:
			after = s
		}
	}
	switch {
	case before == nil || !slices.Contains(before.claims, claim):
		return unrelated
	case !before.active():
		return notActive
	case after == nil || after.active():
		return wasActive
	case gapWithin(gaps, before.rv, after.rv):
		return unknown
	default:
		return wasActive
	}
}

// gapWithin reports whether a watch gap overlaps (from, to).
func gapWithin(gaps []gap, from, to uint64) bool {
	return slices.ContainsFunc(gaps, func(g gap) bool { return g.from < to && g.to > from })
}

// describe lists the binding's states with the claim deletion at rv
// placed among them, for violation messages.
func (h *bindingHistory) describe(rv uint64) string {
	var b strings.Builder
	marked := false
	for _, s := range h.samples {
		if !marked && s.rv > rv {
			b.WriteString(" [claim deleted]")
			marked = true
		}
		phase := string(s.phase)
		if s.unseen {
			phase = "?"
		}
		fmt.Fprintf(&b, " %s@%d(refs=%d", phase, s.rv, s.refs)
		if s.deleted {
			b.WriteString(",gone")
		}
		b.WriteString(")")
	}
	if !marked {
		b.WriteString(" [claim deleted]")
	}
	return strings.TrimSpace(b.String())
}

// UnsafeClaimDeletions returns one violation for every claim deleted while
// a binding listing it was Active, and the number of deletions that could
// not be judged because of a gap in the binding watch. Call CatchUp first.
func (r *Recorder) UnsafeClaimDeletions() (violations []string, unverified int) {
	deletions := r.Deletions()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range deletions {
		for _, h := range r.bindings {
			switch h.activeAt(d.RV, d.Name, r.gaps) {
			case wasActive:
				violations = append(violations, fmt.Sprintf("claim %s was deleted (rv %d, seen %s) while binding %s, which lists it, was Active: %s",
					d.Name, d.RV, d.At.Format(time.StampMilli), h.name, h.describe(d.RV)))
			case unknown:
				unverified++
			case unrelated, notActive:
			}
		}
	}
	return violations, unverified
}
