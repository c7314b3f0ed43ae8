package decision

import (
	"fmt"
	"slices"
	"strings"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// planCopiesMade looks at the copies that exist: a record a failed write
// lost is made again, the earliest deadline of one unbound is kept, and
// one unbound past SeedDeadline is abandoned for a download.
func planCopiesMade(in SeedInput, fills map[string]embedopsv1.ClaimFill, plan *SeedPlan) {
	for _, name := range in.Names {
		claim, exists := in.Claims[name]
		if !exists || claim.CopyOf == "" || claim.Deleting {
			continue
		}
		left := SeedDeadline - in.Now.Sub(claim.Provisioning)
		if claim.Bound || claim.Provisioning.IsZero() || left > 0 {
			if _, recorded := fills[name]; !recorded {
				plan.Fills = append(plan.Fills, embedopsv1.ClaimFill{Name: name, Method: claim.CopyMethod, Source: claim.CopyOf, Commit: in.Commit})
			}
			if !claim.Bound && !claim.Provisioning.IsZero() && (plan.Recheck == 0 || left < plan.Recheck) {
				plan.Recheck = left
			}
			continue
		}
		why := abandonedWhy(in, claim)
		plan.Abandon = append(plan.Abandon, SeedClone{Name: name, Source: claim.CopyOf, Method: claim.CopyMethod, Why: why})
		plan.Fills = append(plan.Fills, embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByDownload, Source: claim.CopyOf, Commit: in.Commit, Fallback: why})
	}
}

// abandonedWhy says why a copy is abandoned: it was not bound in time,
// and for a restore, what the snapshot was doing.
func abandonedWhy(in SeedInput, claim SeedClaim) string {
	if claim.CopyMethod != embedopsv1.ClaimFilledBySnapshot {
		return fmt.Sprintf("the clone of claim %s was not bound within %s", claim.CopyOf, SeedDeadline)
	}
	why := fmt.Sprintf("the restore of snapshot %s was not bound within %s", claim.CopyOf, SeedDeadline)
	switch snapshot := in.Snapshot; {
	case snapshot.Name != claim.CopyOf:
	case !snapshot.Exists:
		why += "; the snapshot does not exist"
	case snapshot.Error != "":
		why += "; the snapshot failed: " + snapshot.Error
	case !snapshot.Ready:
		why += "; the snapshot is not ready to use"
	}
	return why
}

// copySource is what the binding's new claims are copied from (a claim,
// or the binding's snapshot, which the plan then takes when it does not
// exist), "" for nothing yet, or why no copy can be made.
func copySource(in SeedInput, plan *SeedPlan) (string, string) {
	if in.Copy.Refused != "" {
		return "", in.Copy.Refused
	}
	populated := populatedSource(in)
	if copyMethod(in.Copy) == embedopsv1.ClaimFilledBySnapshot {
		switch snapshot := in.Snapshot; {
		case snapshot.Deleting:
			return "", fmt.Sprintf("snapshot %s is being deleted", snapshot.Name)
		case snapshot.Exists:
			return snapshot.Name, ""
		case populated != "":
			plan.Snapshot = snapshotToTake(in)
			return snapshot.Name, ""
		}
	}
	if populated == "" {
		return "", deletingSourceWhy(in)
	}
	return populated, ""
}

// snapshotToTake is the binding's snapshot, of its first populated claim,
// when snapshots are possible and it does not exist yet; nil otherwise.
func snapshotToTake(in SeedInput) *SeedClone {
	if copyMethod(in.Copy) != embedopsv1.ClaimFilledBySnapshot || in.Copy.Refused != "" || in.Snapshot.Name == "" || in.Snapshot.Exists {
		return nil
	}
	populated := populatedSource(in)
	if populated == "" {
		return nil
	}
	return &SeedClone{Name: in.Snapshot.Name, Source: populated, Method: embedopsv1.ClaimFilledBySnapshot}
}

// deletingSourceWhy names the populated claims being deleted when no other
// is populated, "" when there are none.
func deletingSourceWhy(in SeedInput) string {
	var deleting []string
	for name, claim := range in.Claims {
		if claim.Bound && claim.Populated && claim.Deleting {
			deleting = append(deleting, name)
		}
	}
	if len(deleting) == 0 {
		return ""
	}
	slices.Sort(deleting)
	return fmt.Sprintf("the populated claim %s is being deleted", strings.Join(deleting, ", "))
}

// copyMethod is Clone unless the copy is a Snapshot.
func copyMethod(c SeedCopy) embedopsv1.ClaimFillMethod {
	if c.Method == embedopsv1.ClaimFilledBySnapshot {
		return embedopsv1.ClaimFilledBySnapshot
	}
	return embedopsv1.ClaimFilledByClone
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

// copyAbandoned reports whether a copy of the binding was abandoned past
// its deadline (a fallback with a source; a refusal has none). A restore
// abandoned while the binding's snapshot was not ready does not count once
// it is: a slow snapshot ends one scale-up's copies, not the next one's.
func copyAbandoned(in SeedInput) bool {
	return slices.ContainsFunc(in.Fills, func(f embedopsv1.ClaimFill) bool {
		if f.Fallback == "" || f.Source == "" {
			return false
		}
		return f.Source != in.Snapshot.Name || !in.Snapshot.Ready || in.Snapshot.Deleting
	})
}

func fillsByName(fills []embedopsv1.ClaimFill) map[string]embedopsv1.ClaimFill {
	byName := make(map[string]embedopsv1.ClaimFill, len(fills))
	for _, fill := range fills {
		byName[fill.Name] = fill
	}
	return byName
}
