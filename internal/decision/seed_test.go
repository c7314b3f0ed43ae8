package decision_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

const seedCommit = "0123456789abcdef0123456789abcdef01234567"

var seedNow = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// seedNames are the claims of ordinals 0..n-1.
func seedNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cache-tei-%d", i)
	}
	return names
}

func populated(name string) decision.SeedClaim {
	return decision.SeedClaim{Name: name, Bound: true, Populated: true}
}

func seedClaims(claims ...decision.SeedClaim) map[string]decision.SeedClaim {
	byName := map[string]decision.SeedClaim{}
	for _, claim := range claims {
		byName[claim.Name] = claim
	}
	return byName
}

func TestPlanSeeds(t *testing.T) {
	cases := []struct {
		name string
		in   decision.SeedInput
		want decision.SeedPlan
	}{
		{"a scale-up clones the populated claim", decision.SeedInput{Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"))},
			decision.SeedPlan{Replicas: -1, Clones: []decision.SeedClone{{Name: "cache-tei-1", Source: "cache-tei-0", Method: embedopsv1.ClaimFilledByClone}, {Name: "cache-tei-2", Source: "cache-tei-0", Method: embedopsv1.ClaimFilledByClone}},
				Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0"), clone("cache-tei-2", "cache-tei-0")}}},
		{"Download clones nothing", decision.SeedInput{Seed: embedopsv1.CacheSeedDownload, Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"))},
			decision.SeedPlan{Replicas: -1}},
		{"nothing before the binding records a commit", decision.SeedInput{Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0")), Commit: "-"},
			decision.SeedPlan{Replicas: -1}},
		{"Clone starts a new server with one replica", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(3), Hold: true},
			decision.SeedPlan{Replicas: 1}},
		{"Clone holds the rest while the first replica downloads", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(3), Hold: true, Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0", Bound: true})},
			decision.SeedPlan{Replicas: 1}},
		{"Auto never holds a new server", decision.SeedInput{Names: seedNames(3), Hold: true, Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0", Bound: true})},
			decision.SeedPlan{Replicas: -1}},
		{"a storage rollout is not held", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(3), Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0", Bound: true})},
			decision.SeedPlan{Replicas: -1}},
		{"a hold never goes below a claim that exists", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(4), Hold: true, Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0"}, decision.SeedClaim{Name: "cache-tei-1"})},
			decision.SeedPlan{Replicas: 2}},
		{"an unbound claim is no source", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0", Populated: true})},
			decision.SeedPlan{Replicas: -1}},
		{"a deleting claim is no source, and says so", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(
			decision.SeedClaim{Name: "cache-tei-0", Populated: true}, decision.SeedClaim{Name: "cache-tei-5", Bound: true, Populated: true, Deleting: true})},
			decision.SeedPlan{Replicas: -1, Fills: []embedopsv1.ClaimFill{refused("cache-tei-1", "the populated claim cache-tei-5 is being deleted")}}},
		{"the first populated claim by name is the source", decision.SeedInput{Names: seedNames(3), Claims: seedClaims(
			decision.SeedClaim{Name: "cache-tei-0", Bound: true}, populated("cache-tei-1"))},
			decision.SeedPlan{Replicas: -1, Clones: []decision.SeedClone{{Name: "cache-tei-2", Source: "cache-tei-1", Method: embedopsv1.ClaimFilledByClone}},
				Fills: []embedopsv1.ClaimFill{clone("cache-tei-2", "cache-tei-1")}}},
		{"a clone bound in time stays", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CopyOf: "cache-tei-0", CopyMethod: embedopsv1.ClaimFilledByClone, Provisioning: seedNow.Add(-time.Hour), Bound: true})},
			decision.SeedPlan{Replicas: -1, Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}}},
		{"a recorded clone is not recorded again", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CopyOf: "cache-tei-0", CopyMethod: embedopsv1.ClaimFilledByClone, Provisioning: seedNow.Add(-time.Hour), Bound: true}),
			Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}},
			decision.SeedPlan{Replicas: -1}},
		{"a clone still within its deadline waits", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CopyOf: "cache-tei-0", CopyMethod: embedopsv1.ClaimFilledByClone, Provisioning: seedNow.Add(-time.Minute)})},
			decision.SeedPlan{Replicas: -1, Recheck: decision.SeedDeadline - time.Minute, Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}}},
		{"a clone not handed to its provisioner yet waits for ever", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CopyOf: "cache-tei-0", CopyMethod: embedopsv1.ClaimFilledByClone})},
			decision.SeedPlan{Replicas: -1, Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}}},
		{"a clone unbound past its deadline is abandoned, and Auto downloads from then on", decision.SeedInput{Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CopyOf: "cache-tei-0", CopyMethod: embedopsv1.ClaimFilledByClone, Provisioning: seedNow.Add(-decision.SeedDeadline)})},
			decision.SeedPlan{Replicas: -1,
				Abandon: []decision.SeedClone{{Name: "cache-tei-1", Source: "cache-tei-0", Method: embedopsv1.ClaimFilledByClone, Why: "the clone of claim cache-tei-0 was not bound within 2m0s"}},
				Fills:   []embedopsv1.ClaimFill{abandoned("cache-tei-1")}}},
		{"Clone clones the other claims beside an abandoned one", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CopyOf: "cache-tei-0", CopyMethod: embedopsv1.ClaimFilledByClone, Provisioning: seedNow.Add(-decision.SeedDeadline)})},
			decision.SeedPlan{Replicas: -1,
				Abandon: []decision.SeedClone{{Name: "cache-tei-1", Source: "cache-tei-0", Method: embedopsv1.ClaimFilledByClone, Why: "the clone of claim cache-tei-0 was not bound within 2m0s"}},
				Clones:  []decision.SeedClone{{Name: "cache-tei-2", Source: "cache-tei-0", Method: embedopsv1.ClaimFilledByClone}},
				Fills:   []embedopsv1.ClaimFill{abandoned("cache-tei-1"), clone("cache-tei-2", "cache-tei-0")}}},
		{"after an abandoned clone Auto downloads", decision.SeedInput{Names: seedNames(3), Hold: true, Claims: seedClaims(populated("cache-tei-0")),
			Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Source: "cache-tei-0", Fallback: "not bound"}}},
			decision.SeedPlan{Replicas: -1}},
		{"after an abandoned clone Clone still clones the other claims", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0")),
			Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Source: "cache-tei-0", Fallback: "not bound"}}},
			decision.SeedPlan{Replicas: -1, Clones: []decision.SeedClone{{Name: "cache-tei-2", Source: "cache-tei-0", Method: embedopsv1.ClaimFilledByClone}},
				Fills: []embedopsv1.ClaimFill{clone("cache-tei-2", "cache-tei-0")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			switch in.Commit {
			case "":
				in.Commit = seedCommit
			case "-":
				in.Commit = ""
			}
			in.Now = seedNow
			NewWithT(t).Expect(decision.PlanSeeds(in)).To(Equal(tc.want))
		})
	}
}

// TestPlanSeedsNeverHoldsBelowAClaimThatExists enumerates claim states
// for up to four replicas, by clone and by snapshot (not taken, taken,
// being deleted): a hold never stops an ordinal whose claim exists (its
// pod may be running), nothing is copied over a claim that exists, and
// nothing is cloned or snapshotted from a claim that is not bound and
// populated.
func TestPlanSeedsNeverHoldsBelowAClaimThatExists(t *testing.T) {
	states := []*decision.SeedClaim{nil, {}, {Bound: true}, {Bound: true, Populated: true}, {Bound: true, Populated: true, Deleting: true}}
	copies := []decision.SeedCopy{{Method: embedopsv1.ClaimFilledByClone}, {Method: embedopsv1.ClaimFilledBySnapshot}}
	snapshots := []decision.SeedSnapshot{{Name: snap}, {Name: snap, Exists: true}, {Name: snap, Exists: true, Deleting: true}}
	for replicas := 2; replicas <= 4; replicas++ {
		names := seedNames(replicas)
		for combination := range pow(len(states), replicas) {
			claims := map[string]decision.SeedClaim{}
			for i, c := 0, combination; i < replicas; i, c = i+1, c/len(states) {
				if state := states[c%len(states)]; state != nil {
					claim := *state
					claim.Name = names[i]
					claims[names[i]] = claim
				}
			}
			for _, copied := range copies {
				for _, snapshot := range snapshots {
					in := decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Copy: copied, Snapshot: snapshot, Names: names, Claims: claims, Hold: true, Commit: seedCommit, Now: seedNow}
					checkSeedPlan(t, in, decision.PlanSeeds(in))
				}
			}
		}
	}
}

// checkSeedPlan fails on a plan that holds below a claim that exists,
// copies over one, or copies from a claim not bound and populated.
func checkSeedPlan(t *testing.T, in decision.SeedInput, plan decision.SeedPlan) {
	t.Helper()
	for i, name := range in.Names {
		if _, exists := in.Claims[name]; exists && plan.Replicas >= 0 && int32(i) >= plan.Replicas { //nolint:gosec // at most 4.
			t.Fatalf("%+v: held at %d below claim %s", in, plan.Replicas, name)
		}
	}
	usable := func(name string) bool {
		source := in.Claims[name]
		return source.Bound && source.Populated && !source.Deleting
	}
	if plan.Snapshot != nil && (!usable(plan.Snapshot.Source) || in.Snapshot.Exists) {
		t.Fatalf("%+v: snapshot %+v", in, plan.Snapshot)
	}
	for _, c := range plan.Clones {
		if _, exists := in.Claims[c.Name]; exists {
			t.Fatalf("%+v: copied over claim %s", in, c.Name)
		}
		switch c.Method {
		case embedopsv1.ClaimFilledBySnapshot:
			if c.Source != snap || in.Snapshot.Deleting {
				t.Fatalf("%+v: restored %+v", in, c)
			}
		default:
			if !usable(c.Source) {
				t.Fatalf("%+v: cloned from %+v", in, in.Claims[c.Source])
			}
		}
	}
}

func pow(base, exp int) int {
	n := 1
	for range exp {
		n *= base
	}
	return n
}

func abandoned(name string) embedopsv1.ClaimFill {
	return embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByDownload, Source: "cache-tei-0", Commit: seedCommit,
		Fallback: "the clone of claim cache-tei-0 was not bound within 2m0s"}
}

func refused(name, why string) embedopsv1.ClaimFill {
	return embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByDownload, Commit: seedCommit, Fallback: why}
}

func clone(name, source string) embedopsv1.ClaimFill {
	return embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByClone, Source: source, Commit: seedCommit}
}

const snap = "cache-0123456789ab"

func restore(name string) embedopsv1.ClaimFill {
	return embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledBySnapshot, Source: snap, Commit: seedCommit}
}

func restoring(name string, since time.Duration) decision.SeedClaim {
	return decision.SeedClaim{Name: name, CopyOf: snap, CopyMethod: embedopsv1.ClaimFilledBySnapshot, Provisioning: seedNow.Add(-since)}
}

func TestPlanSeedsWithASnapshot(t *testing.T) {
	bySnapshot := decision.SeedCopy{Method: embedopsv1.ClaimFilledBySnapshot}
	notTaken := decision.SeedSnapshot{Name: snap}
	taken := decision.SeedSnapshot{Name: snap, Exists: true}
	restores := func(names ...string) []decision.SeedClone {
		var clones []decision.SeedClone
		for _, name := range names {
			clones = append(clones, decision.SeedClone{Name: name, Source: snap, Method: embedopsv1.ClaimFilledBySnapshot})
		}
		return clones
	}
	notBound := "the restore of snapshot " + snap + " was not bound within 2m0s"
	cases := []struct {
		name string
		in   decision.SeedInput
		want decision.SeedPlan
	}{
		{"the first scale-up takes the snapshot and restores from it", decision.SeedInput{Copy: bySnapshot, Snapshot: notTaken, Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"))},
			decision.SeedPlan{Replicas: -1, Snapshot: &decision.SeedClone{Name: snap, Source: "cache-tei-0", Method: embedopsv1.ClaimFilledBySnapshot},
				Clones: restores("cache-tei-1", "cache-tei-2"), Fills: []embedopsv1.ClaimFill{restore("cache-tei-1"), restore("cache-tei-2")}}},
		{"a later scale-up restores the snapshot taken, with its source claim gone", decision.SeedInput{Copy: bySnapshot, Snapshot: taken, Names: seedNames(3),
			Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0", Bound: true}, decision.SeedClaim{Name: "cache-tei-1", Bound: true, CopyOf: snap, CopyMethod: embedopsv1.ClaimFilledBySnapshot}),
			Fills:  []embedopsv1.ClaimFill{restore("cache-tei-1")}},
			decision.SeedPlan{Replicas: -1, Clones: restores("cache-tei-2"), Fills: []embedopsv1.ClaimFill{restore("cache-tei-2")}}},
		{"a snapshot being deleted is no source, and says so", decision.SeedInput{Copy: bySnapshot, Snapshot: decision.SeedSnapshot{Name: snap, Exists: true, Deleting: true},
			Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"))},
			decision.SeedPlan{Replicas: -1, Fills: []embedopsv1.ClaimFill{refused("cache-tei-1", "snapshot "+snap+" is being deleted")}}},
		{"a restore of a snapshot never ready is abandoned, saying so", decision.SeedInput{Copy: bySnapshot, Snapshot: taken, Names: seedNames(2),
			Claims: seedClaims(populated("cache-tei-0"), restoring("cache-tei-1", decision.SeedDeadline))},
			decision.SeedPlan{Replicas: -1, Abandon: []decision.SeedClone{{Name: "cache-tei-1", Source: snap, Method: embedopsv1.ClaimFilledBySnapshot, Why: notBound + "; the snapshot is not ready to use"}},
				Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Source: snap, Commit: seedCommit, Fallback: notBound + "; the snapshot is not ready to use"}}}},
		{"a restore of a failed snapshot says what failed", decision.SeedInput{Copy: bySnapshot, Snapshot: decision.SeedSnapshot{Name: snap, Exists: true, Error: "no space"}, Names: seedNames(2),
			Claims: seedClaims(populated("cache-tei-0"), restoring("cache-tei-1", decision.SeedDeadline+time.Second))},
			decision.SeedPlan{Replicas: -1, Abandon: []decision.SeedClone{{Name: "cache-tei-1", Source: snap, Method: embedopsv1.ClaimFilledBySnapshot, Why: notBound + "; the snapshot failed: no space"}},
				Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Source: snap, Commit: seedCommit, Fallback: notBound + "; the snapshot failed: no space"}}}},
		{"a restore within its deadline waits on the snapshot", decision.SeedInput{Copy: bySnapshot, Snapshot: taken, Names: seedNames(2),
			Claims: seedClaims(populated("cache-tei-0"), restoring("cache-tei-1", time.Minute))},
			decision.SeedPlan{Replicas: -1, Recheck: decision.SeedDeadline - time.Minute, Fills: []embedopsv1.ClaimFill{restore("cache-tei-1")}}},
		{"Snapshot takes the snapshot as soon as a claim is populated", decision.SeedInput{Seed: embedopsv1.CacheSeedSnapshot, Copy: bySnapshot, Snapshot: notTaken, Names: seedNames(1),
			Claims: seedClaims(populated("cache-tei-0"))},
			decision.SeedPlan{Replicas: -1, Snapshot: &decision.SeedClone{Name: snap, Source: "cache-tei-0", Method: embedopsv1.ClaimFilledBySnapshot}}},
		{"Snapshot takes nothing more once the snapshot exists", decision.SeedInput{Seed: embedopsv1.CacheSeedSnapshot, Copy: bySnapshot, Snapshot: taken, Names: seedNames(1),
			Claims: seedClaims(populated("cache-tei-0"))},
			decision.SeedPlan{Replicas: -1}},
		{"Auto takes no snapshot before a scale-up needs one", decision.SeedInput{Copy: bySnapshot, Snapshot: notTaken, Names: seedNames(1),
			Claims: seedClaims(populated("cache-tei-0"))},
			decision.SeedPlan{Replicas: -1}},
		{"Auto restores again once a snapshot that was too slow is ready", decision.SeedInput{Copy: bySnapshot, Snapshot: decision.SeedSnapshot{Name: snap, Exists: true, Ready: true},
			Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"), decision.SeedClaim{Name: "cache-tei-1", Bound: true}),
			Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Source: snap, Commit: seedCommit, Fallback: notBound}}},
			decision.SeedPlan{Replicas: -1, Clones: restores("cache-tei-2"), Fills: []embedopsv1.ClaimFill{restore("cache-tei-2")}}},
		{"Auto downloads after a restore abandoned while the snapshot is still not ready", decision.SeedInput{Copy: bySnapshot, Snapshot: taken,
			Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"), decision.SeedClaim{Name: "cache-tei-1", Bound: true}),
			Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Source: snap, Commit: seedCommit, Fallback: notBound}}},
			decision.SeedPlan{Replicas: -1}},
		{"Snapshot holds a new server until the first replica is populated", decision.SeedInput{Seed: embedopsv1.CacheSeedSnapshot, Copy: bySnapshot, Snapshot: notTaken, Names: seedNames(3), Hold: true,
			Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0", Bound: true})},
			decision.SeedPlan{Replicas: 1}},
		{"a refused copy is never held for, and every new claim says why it downloads", decision.SeedInput{Seed: embedopsv1.CacheSeedSnapshot, Copy: decision.SeedCopy{Refused: "no VolumeSnapshotClass names driver d"},
			Names: seedNames(3), Hold: true, Claims: seedClaims(decision.SeedClaim{Name: "cache-tei-0", Bound: true})},
			decision.SeedPlan{Replicas: -1, Fills: []embedopsv1.ClaimFill{refused("cache-tei-1", "no VolumeSnapshotClass names driver d"), refused("cache-tei-2", "no VolumeSnapshotClass names driver d")}}},
		{"Auto copies again after a refusal is fixed", decision.SeedInput{Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"), decision.SeedClaim{Name: "cache-tei-1", Bound: true}),
			Fills: []embedopsv1.ClaimFill{refused("cache-tei-1", "VolumeSnapshotClass x not found")}},
			decision.SeedPlan{Replicas: -1, Clones: []decision.SeedClone{{Name: "cache-tei-2", Source: "cache-tei-0", Method: embedopsv1.ClaimFilledByClone}},
				Fills: []embedopsv1.ClaimFill{clone("cache-tei-2", "cache-tei-0")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Commit, in.Now = seedCommit, seedNow
			NewWithT(t).Expect(decision.PlanSeeds(in)).To(Equal(tc.want))
		})
	}
}
