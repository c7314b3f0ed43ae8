package decision

import (
	"fmt"
	"slices"
	"time"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// SeedDeadline is how long a cloned claim may stay unbound before its
// replica downloads instead: external-provisioner refuses a clone the
// driver cannot make at once (ProvisioningFailed), and a clone that binds
// takes the time of a volume copy, so two minutes only ever end a clone
// that is not coming.
const SeedDeadline = 2 * time.Minute

// SeedClaim is what a seed plan knows of one claim of the binding.
type SeedClaim struct {
	// Name of the claim.
	Name string
	// Bound: the claim is bound to a volume; Deleting: it has a deletion
	// timestamp.
	Bound, Deleting bool
	// Populated: the pod of its ordinal reported the binding's commit and
	// content digest from it.
	Populated bool
	// CloneOf is the claim its dataSourceRef names, "" for none.
	CloneOf string
	// Provisioning is when the claim was first seen handed to its
	// provisioner; zero while it is not (a WaitForFirstConsumer claim
	// whose pod waits for a node: the cluster autoscaler may take
	// minutes, and the clone is not late).
	Provisioning time.Time
}

// SeedInput is what PlanSeeds decides from.
type SeedInput struct {
	// Seed is the server's spec.cache.seed; "" is Auto.
	Seed embedopsv1.CacheSeed
	// Commit is the binding's recorded commit, "" until one is recorded.
	Commit string
	// Names are the claims of ordinals 0..replicas-1 of the StatefulSet.
	Names []string
	// Claims are the binding's claims that exist, by name.
	Claims map[string]SeedClaim
	// Fills are the binding's records (status.claimFills).
	Fills []embedopsv1.ClaimFill
	// Hold: the StatefulSet's replicas may be held back until a replica
	// is populated (false during a storage rollout, which sets them).
	Hold bool
	// Now is the time the plan is made at.
	Now time.Time
}

// SeedPlan is what the act step does for the claims of new replicas.
type SeedPlan struct {
	// Clones are claims to create as clones, each with its source.
	Clones []SeedClone
	// Abandon are clones to delete, never bound, whose replicas download.
	Abandon []SeedClone
	// Fills are the records the binding gains.
	Fills []embedopsv1.ClaimFill
	// Replicas is what the StatefulSet is held at until the first replica
	// is populated, -1 for no hold.
	Replicas int32
	// Recheck is when the earliest clone still unbound reaches its
	// deadline, 0 for none.
	Recheck time.Duration
}

// SeedClone is a claim cloned from another.
type SeedClone struct {
	Name, Source string
	// Why a clone is abandoned.
	Why string
}

// PlanSeeds decides how the claims of new replicas are filled. With
// Download, or before the binding recorded a commit, nothing. Else each
// missing claim of an ordinal is cloned from the first populated, bound
// claim of the binding; a clone unbound SeedDeadline after it was handed to
// its provisioner is abandoned
// (deleted, never bound: it holds nothing) and its replica downloads, and
// Auto then downloads for every later claim of the binding. Auto never
// delays a replica: a claim is cloned when a populated one exists as its
// ordinal is added (a scale-up), else downloaded. With Clone, while no
// claim is populated, the StatefulSet is held at the ordinals whose claims
// exist (at least one), so replicas 2..n of a new server start from the
// first one's copy; it never holds below an ordinal whose claim exists, so
// no running pod is taken.
func PlanSeeds(in SeedInput) SeedPlan {
	plan := SeedPlan{Replicas: -1}
	if in.Seed == embedopsv1.CacheSeedDownload || in.Commit == "" || len(in.Names) < 2 {
		return plan
	}
	fills := fillsByName(in.Fills)
	for _, name := range in.Names {
		claim, exists := in.Claims[name]
		if !exists || claim.CloneOf == "" || claim.Deleting {
			continue
		}
		left := SeedDeadline - in.Now.Sub(claim.Provisioning)
		if claim.Bound || claim.Provisioning.IsZero() || left > 0 {
			if _, recorded := fills[name]; !recorded {
				// A clone whose record a failed write lost.
				plan.Fills = append(plan.Fills, embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByClone, Source: claim.CloneOf, Commit: in.Commit})
			}
			if !claim.Bound && !claim.Provisioning.IsZero() && (plan.Recheck == 0 || left < plan.Recheck) {
				plan.Recheck = left
			}
			continue
		}
		why := fmt.Sprintf("the clone of claim %s was not bound within %s", claim.CloneOf, SeedDeadline)
		plan.Abandon = append(plan.Abandon, SeedClone{Name: name, Source: claim.CloneOf, Why: why})
		plan.Fills = append(plan.Fills, embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByDownload, Source: claim.CloneOf, Commit: in.Commit, Fallback: why})
	}
	if in.Seed != embedopsv1.CacheSeedClone && (cloneAbandoned(in.Fills) || len(plan.Abandon) > 0) {
		return plan
	}
	source := populatedSource(in)
	for i, name := range in.Names {
		if _, exists := in.Claims[name]; exists {
			continue
		}
		if fill, recorded := fills[name]; recorded && fill.Method == embedopsv1.ClaimFilledByDownload {
			continue
		}
		if source == "" {
			if in.Hold && in.Seed == embedopsv1.CacheSeedClone {
				plan.Replicas = max(int32(i), claimsUpTo(in), 1) //nolint:gosec // i < len(Names), at most the server's replicas.
			}
			break
		}
		plan.Clones = append(plan.Clones, SeedClone{Name: name, Source: source})
		plan.Fills = append(plan.Fills, embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByClone, Source: source, Commit: in.Commit})
	}
	return plan
}

// claimsUpTo is one past the highest ordinal whose claim exists: a hold
// below it could stop a running pod.
func claimsUpTo(in SeedInput) int32 {
	for i := len(in.Names) - 1; i >= 0; i-- {
		if _, exists := in.Claims[in.Names[i]]; exists {
			return int32(i + 1) //nolint:gosec // at most the server's replicas.
		}
	}
	return 0
}

// populatedSource is the first claim, by name, that is bound, not being
// deleted, and populated at the binding's commit; "" for none.
func populatedSource(in SeedInput) string {
	var names []string
	for name, claim := range in.Claims {
		if claim.Bound && !claim.Deleting && claim.Populated {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return names[0]
}

// cloneAbandoned reports whether a clone of the binding was abandoned.
func cloneAbandoned(fills []embedopsv1.ClaimFill) bool {
	return slices.ContainsFunc(fills, func(f embedopsv1.ClaimFill) bool { return f.Fallback != "" })
}

func fillsByName(fills []embedopsv1.ClaimFill) map[string]embedopsv1.ClaimFill {
	byName := make(map[string]embedopsv1.ClaimFill, len(fills))
	for _, fill := range fills {
		byName[fill.Name] = fill
	}
	return byName
}

// MergeFills adds new records to the binding's, by name: a later record of
// a claim replaces its earlier one (a clone abandoned for a download).
func MergeFills(recorded, found []embedopsv1.ClaimFill) ([]embedopsv1.ClaimFill, bool) {
	merged := slices.Clone(recorded)
	changed := false
	for _, fill := range found {
		i := slices.IndexFunc(merged, func(f embedopsv1.ClaimFill) bool { return f.Name == fill.Name })
		switch {
		case i < 0:
			merged = append(merged, fill)
			changed = true
		case merged[i] != fill:
			merged[i] = fill
			changed = true
		}
	}
	return merged, changed
}
