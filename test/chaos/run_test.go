package chaos

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Waits of a run, generous for 2 busy cores.
const (
	// settleTimeout bounds convergence after the faults. A restarted
	// kube-controller-manager or kube-scheduler waits out its predecessor's
	// 15s lease before it acts (measured: 17s), and one that exits again
	// on a loaded machine waits once more. A CI run gave up at 90s with
	// every new claim unbound.
	settleTimeout = 150 * time.Second
	// drainTimeout bounds the teardown: a binding never referenced is kept
	// 30s before it retires, even with retainFor 0s.
	drainTimeout = 75 * time.Second
	// pollEvery is how often a run looks at the cluster while it waits.
	pollEvery = 500 * time.Millisecond
)

// chaosRun is one fault test: its namespace, the recorder watching it, its
// servers and controllers, and what it counts for the summary.
type chaosRun struct {
	t         *testing.T
	namespace string
	recorder  *Recorder
	fleet     *fleet
	procs     *processes
	rng       *rand.Rand
	started   time.Time
	// cycles and faults are counted by the test for the summary; faultKind
	// says what a fault is.
	cycles    int
	faults    int
	faultKind string
	// violations are the invariant violations found so far.
	violations []string
}

// newRun starts a run in a new namespace with slots server slots and
// controllers run with args; a controller with leader election keeps its
// lease in the namespace.
func newRun(t *testing.T, slots int, args ...string) *chaosRun {
	return newSeededRun(t, *seed, t.Name(), slots, args...)
}

// newSeededRun is newRun with the fault schedule of runSeed (0 picks one)
// for the test named schedule, so a subtest can replay a test's schedule.
func newSeededRun(t *testing.T, runSeed uint64, schedule string, slots int, args ...string) *chaosRun {
	namespace := cluster.Namespace(t)
	args = append(args, "--leader-election-namespace="+namespace)
	recorder, err := StartRecorder(t.Context(), watcher, namespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(recorder.Stop)
	if runSeed == 0 {
		runSeed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -args -chaos.seed=%d)", runSeed, runSeed)
	rng := rand.New(rand.NewPCG(runSeed, nameHash(schedule)))
	procs := newProcesses(t, args...)
	return &chaosRun{t: t, namespace: namespace, recorder: recorder, fleet: newFleet(namespace, slots, rng), procs: procs, rng: rng, started: time.Now()}
}

// nameHash spreads one seed over the tests.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

// delay returns a random duration below limit.
func (r *chaosRun) delay(limit time.Duration) time.Duration {
	return time.Duration(r.rng.Int64N(int64(limit)))
}

// injectAfter waits a random time below limit and then runs fault. The
// wait is the fault injection itself: it lands the fault at an arbitrary
// point of whatever the controller is doing.
func (r *chaosRun) injectAfter(ctx context.Context, limit time.Duration, fault func()) {
	timer := time.NewTimer(r.delay(limit))
	defer timer.Stop()
	select {
	case <-timer.C:
		fault()
		r.faults++
	case <-ctx.Done():
	}
}

// settle waits until the namespace converged and checks the invariants
// and that the recorder keeps up.
func (r *chaosRun) settle(ctx context.Context) {
	snapshot, err := r.waitFor(ctx, "convergence", settleTimeout, converged)
	if err != nil {
		// The cluster's own components (kube-controller-manager above all)
		// are half of what converges: show what they said.
		r.t.Errorf("%v\ncluster component logs:\n%s", err, cluster.ComponentLogs(logTail))
	}
	r.check(snapshot)
	r.catchUp(ctx)
}

// catchUp waits until the recorder saw every write made so far.
func (r *chaosRun) catchUp(ctx context.Context) {
	if err := r.recorder.CatchUp(ctx, cluster.Client, r.namespace, time.Minute); err != nil {
		r.t.Error(err)
	}
}

// check records the invariant violations of a snapshot, each once.
func (r *chaosRun) check(snapshot *Snapshot) {
	if snapshot != nil {
		r.violate(Check(snapshot)...)
	}
}

// violate reports violations not reported yet.
func (r *chaosRun) violate(violations ...string) {
	for _, v := range violations {
		if !slices.Contains(r.violations, v) {
			r.t.Errorf("invariant violated: %s", v)
			r.violations = append(r.violations, v)
		}
	}
}

// finish settles the namespace, deletes every server and checks that
// everything drains, then judges every claim deletion of the run and logs
// the summary line.
func (r *chaosRun) finish(ctx context.Context) {
	t := r.t
	faultPhase := time.Since(r.started)
	r.settle(ctx)
	if err := r.deleteAll(ctx); err != nil {
		t.Fatal(err)
	}
	snapshot, err := r.waitFor(ctx, "the teardown", drainTimeout, drained)
	if err != nil {
		t.Error(err)
	}
	r.check(snapshot)
	r.catchUp(ctx)
	unsafe, unverified := r.recorder.UnsafeClaimDeletions()
	r.violate(unsafe...)
	r.violate(r.recorder.MountedClaimDeletions()...)
	t.Logf("chaos summary: %s: cycles done %d, %s %d, invariant violations %d (claims seen %d, deletions judged %d, unverified %d), changes %v, faults %s, total %s",
		t.Name(), r.cycles, r.faultKind, r.faults, len(r.violations), r.recorder.ClaimsSeen(), len(r.recorder.Deletions()), unverified, r.fleet.ops,
		faultPhase.Round(time.Second), time.Since(r.started).Round(time.Second))
}

// deleteAll deletes every server of the fleet.
func (r *chaosRun) deleteAll(ctx context.Context) error {
	for slot, name := range r.fleet.slots {
		if name != "" {
			if err := r.fleet.delete(ctx, slot); err != nil {
				return err
			}
		}
	}
	return nil
}
