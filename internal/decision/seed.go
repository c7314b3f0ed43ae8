package decision

import (
	"slices"
	"time"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// SeedDeadline is how long a copied claim (a clone or a restore) may stay
// unbound after it was handed to its provisioner before its replica
// downloads instead: external-provisioner refuses a copy the driver cannot
// make at once (ProvisioningFailed) and retries one whose snapshot is not
// ready, and a copy that binds takes the time of a volume copy, so two
// minutes only ever end a copy that is not coming.
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
	// CopyOf is the claim (Clone) or VolumeSnapshot (Snapshot) its
	// dataSourceRef names, "" for none.
	CopyOf string
	// CopyMethod is Clone or Snapshot when CopyOf is set.
	CopyMethod embedopsv1.ClaimFillMethod
	// Provisioning is when the claim was first seen handed to its
	// provisioner; zero while it is not (a WaitForFirstConsumer claim
	// whose pod waits for a node: the cluster autoscaler may take
	// minutes, and the copy is not late).
	Provisioning time.Time
}

// SeedCopy is how the binding's new claims can be copied, resolved from
// spec.cache.seed and the cluster's storage: Clone or Snapshot, or why no
// copy can be made (Refused).
type SeedCopy struct {
	// Method is Clone (also when empty) or Snapshot.
	Method embedopsv1.ClaimFillMethod
	// Refused says why no copy can be made: the replicas download.
	Refused string
}

// SeedSnapshot is the binding's VolumeSnapshot at its commit.
type SeedSnapshot struct {
	// Name it has, or is to be taken under.
	Name string
	// Exists, Ready (readyToUse) and Deleting (a deletion timestamp).
	Exists, Ready, Deleting bool
	// Error is the snapshot-controller's status.error message.
	Error string
}

// SeedInput is what PlanSeeds decides from.
type SeedInput struct {
	// Seed is the server's spec.cache.seed; "" is Auto.
	Seed embedopsv1.CacheSeed
	// Copy is how a copy is made (Snapshot: of Snapshot).
	Copy SeedCopy
	// Snapshot is the binding's snapshot at Commit, for Copy Snapshot.
	Snapshot SeedSnapshot
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
	// Snapshot is the VolumeSnapshot to take first, nil for none.
	Snapshot *SeedClone
	// Clones are claims to create as copies, each with its source.
	Clones []SeedClone
	// Abandon are copies to delete, never bound, whose replicas download.
	Abandon []SeedClone
	// Fills are the records the binding gains.
	Fills []embedopsv1.ClaimFill
	// Replicas is what the StatefulSet is held at until the first replica
	// is populated, -1 for no hold.
	Replicas int32
	// Recheck is when the earliest copy still unbound reaches its
	// deadline, 0 for none.
	Recheck time.Duration
}

// SeedClone is a claim (or the snapshot) made from a source.
type SeedClone struct {
	Name, Source string
	// Method is Clone (the source is a claim) or Snapshot (the source is
	// the binding's VolumeSnapshot; for the snapshot itself, the claim it
	// is taken of).
	Method embedopsv1.ClaimFillMethod
	// Why a copy is abandoned.
	Why string
}

// PlanSeeds decides how the claims of new replicas are filled. With
// Download, or before the binding recorded a commit, nothing. Else each
// missing claim of an ordinal is copied (SeedCopy: a clone of the first
// populated, bound claim of the binding, or a restore of the binding's
// snapshot, taken of that claim once); a copy unbound SeedDeadline after
// it was handed to its provisioner is abandoned (deleted, never bound: it
// holds nothing) and its replica downloads, and Auto then downloads for
// every later claim of the binding. A copy that cannot be made (Refused,
// the snapshot or the only populated claim being deleted) is recorded as
// a download with its reason. Auto never delays a replica: a claim is
// copied when a source exists as its ordinal is added (a scale-up), else
// downloaded. With Clone or Snapshot, while there is no source, the
// StatefulSet is held at the ordinals whose claims exist (at least one),
// so replicas 2..n of a new server start from the first one's copy; it
// never holds below an ordinal whose claim exists, so no running pod is
// taken. Snapshot also takes the binding's snapshot as soon as a claim is
// populated (SnapshotAhead), so a scale-up finds it ready.
func PlanSeeds(in SeedInput) SeedPlan {
	plan := planClaims(in)
	if plan.Snapshot == nil && SnapshotAhead(in.Seed) && in.Commit != "" {
		plan.Snapshot = snapshotToTake(in)
	}
	return plan
}

// SnapshotAhead reports whether a server of seed has its binding's
// snapshot taken before any scale-up needs it: only when it asked for
// snapshots (Auto takes one at the first scale-up, so a server that never
// scales costs no snapshot).
func SnapshotAhead(seed embedopsv1.CacheSeed) bool {
	return seed == embedopsv1.CacheSeedSnapshot
}

// planClaims plans the claims of PlanSeeds.
func planClaims(in SeedInput) SeedPlan {
	plan := SeedPlan{Replicas: -1}
	if in.Seed == embedopsv1.CacheSeedDownload || in.Commit == "" || len(in.Names) < 2 {
		return plan
	}
	fills := fillsByName(in.Fills)
	planCopiesMade(in, fills, &plan)
	explicit := in.Seed == embedopsv1.CacheSeedClone || in.Seed == embedopsv1.CacheSeedSnapshot
	if !explicit && (copyAbandoned(in) || len(plan.Abandon) > 0) {
		return plan
	}
	source, why := copySource(in, &plan)
	for i, name := range in.Names {
		if _, exists := in.Claims[name]; exists {
			continue
		}
		if fill, recorded := fills[name]; recorded && fill.Method == embedopsv1.ClaimFilledByDownload {
			continue
		}
		if why != "" {
			plan.Fills = append(plan.Fills, embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByDownload, Commit: in.Commit, Fallback: why})
			continue
		}
		if source == "" {
			if in.Hold && explicit {
				plan.Replicas = max(int32(i), claimsUpTo(in), 1) //nolint:gosec // i < len(Names), at most the server's replicas.
			}
			break
		}
		method := copyMethod(in.Copy)
		plan.Clones = append(plan.Clones, SeedClone{Name: name, Source: source, Method: method})
		plan.Fills = append(plan.Fills, embedopsv1.ClaimFill{Name: name, Method: method, Source: source, Commit: in.Commit})
	}
	return plan
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

// SnapshotName is the name of a binding's VolumeSnapshot at commit: one
// per binding and commit, at most 253 characters.
func SnapshotName(binding, commit string) string {
	const commitChars = 12
	short := commit[:min(len(commit), commitChars)]
	return binding[:min(len(binding), 253-1-len(short))] + "-" + short
}
