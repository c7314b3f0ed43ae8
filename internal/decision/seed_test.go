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
			decision.SeedPlan{Replicas: -1, Clones: []decision.SeedClone{{Name: "cache-tei-1", Source: "cache-tei-0"}, {Name: "cache-tei-2", Source: "cache-tei-0"}},
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
		{"an unbound or deleting claim is no source", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(
			decision.SeedClaim{Name: "cache-tei-0", Populated: true}, decision.SeedClaim{Name: "cache-tei-5", Bound: true, Populated: true, Deleting: true})},
			decision.SeedPlan{Replicas: -1}},
		{"the first populated claim by name is the source", decision.SeedInput{Names: seedNames(3), Claims: seedClaims(
			decision.SeedClaim{Name: "cache-tei-0", Bound: true}, populated("cache-tei-1"))},
			decision.SeedPlan{Replicas: -1, Clones: []decision.SeedClone{{Name: "cache-tei-2", Source: "cache-tei-1"}},
				Fills: []embedopsv1.ClaimFill{clone("cache-tei-2", "cache-tei-1")}}},
		{"a clone bound in time stays", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CloneOf: "cache-tei-0", Provisioning: seedNow.Add(-time.Hour), Bound: true})},
			decision.SeedPlan{Replicas: -1, Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}}},
		{"a recorded clone is not recorded again", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CloneOf: "cache-tei-0", Provisioning: seedNow.Add(-time.Hour), Bound: true}),
			Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}},
			decision.SeedPlan{Replicas: -1}},
		{"a clone still within its deadline waits", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CloneOf: "cache-tei-0", Provisioning: seedNow.Add(-time.Minute)})},
			decision.SeedPlan{Replicas: -1, Recheck: decision.SeedDeadline - time.Minute, Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}}},
		{"a clone not handed to its provisioner yet waits for ever", decision.SeedInput{Names: seedNames(2), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CloneOf: "cache-tei-0"})},
			decision.SeedPlan{Replicas: -1, Fills: []embedopsv1.ClaimFill{clone("cache-tei-1", "cache-tei-0")}}},
		{"a clone unbound past its deadline is abandoned, and Auto downloads from then on", decision.SeedInput{Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CloneOf: "cache-tei-0", Provisioning: seedNow.Add(-decision.SeedDeadline)})},
			decision.SeedPlan{Replicas: -1,
				Abandon: []decision.SeedClone{{Name: "cache-tei-1", Source: "cache-tei-0", Why: "the clone of claim cache-tei-0 was not bound within 2m0s"}},
				Fills:   []embedopsv1.ClaimFill{abandoned("cache-tei-1")}}},
		{"Clone clones the other claims beside an abandoned one", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0"),
			decision.SeedClaim{Name: "cache-tei-1", CloneOf: "cache-tei-0", Provisioning: seedNow.Add(-decision.SeedDeadline)})},
			decision.SeedPlan{Replicas: -1,
				Abandon: []decision.SeedClone{{Name: "cache-tei-1", Source: "cache-tei-0", Why: "the clone of claim cache-tei-0 was not bound within 2m0s"}},
				Clones:  []decision.SeedClone{{Name: "cache-tei-2", Source: "cache-tei-0"}},
				Fills:   []embedopsv1.ClaimFill{abandoned("cache-tei-1"), clone("cache-tei-2", "cache-tei-0")}}},
		{"after an abandoned clone Auto downloads", decision.SeedInput{Names: seedNames(3), Hold: true, Claims: seedClaims(populated("cache-tei-0")),
			Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Fallback: "not bound"}}},
			decision.SeedPlan{Replicas: -1}},
		{"after an abandoned clone Clone still clones the other claims", decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: seedNames(3), Claims: seedClaims(populated("cache-tei-0")),
			Fills: []embedopsv1.ClaimFill{{Name: "cache-tei-1", Method: embedopsv1.ClaimFilledByDownload, Fallback: "not bound"}}},
			decision.SeedPlan{Replicas: -1, Clones: []decision.SeedClone{{Name: "cache-tei-2", Source: "cache-tei-0"}},
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
// for up to four replicas: a hold never stops an ordinal whose claim
// exists (its pod may be running), and nothing is cloned from a claim
// that is not bound and populated.
func TestPlanSeedsNeverHoldsBelowAClaimThatExists(t *testing.T) {
	states := []*decision.SeedClaim{nil, {}, {Bound: true}, {Bound: true, Populated: true}, {Bound: true, Populated: true, Deleting: true}}
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
			plan := decision.PlanSeeds(decision.SeedInput{Seed: embedopsv1.CacheSeedClone, Names: names, Claims: claims, Hold: true, Commit: seedCommit, Now: seedNow})
			for i, name := range names {
				if _, exists := claims[name]; exists && plan.Replicas >= 0 && int32(i) >= plan.Replicas { //nolint:gosec // at most 4.
					t.Fatalf("%v: held at %d below claim %s", claims, plan.Replicas, name)
				}
			}
			for _, c := range plan.Clones {
				source := claims[c.Source]
				if !source.Bound || !source.Populated || source.Deleting {
					t.Fatalf("%v: cloned from %+v", claims, source)
				}
				if _, exists := claims[c.Name]; exists {
					t.Fatalf("%v: cloned over claim %s", claims, c.Name)
				}
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

func clone(name, source string) embedopsv1.ClaimFill {
	return embedopsv1.ClaimFill{Name: name, Method: embedopsv1.ClaimFilledByClone, Source: source, Commit: seedCommit}
}
