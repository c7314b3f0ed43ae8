package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/embedops/embedops/test/harness"
)

// leaseArgs give the replicas short leases, so that a standby takes over
// within seconds of the leader's death, yet a renewal has seconds to get
// through on 2 busy cores.
var leaseArgs = []string{
	"--enable-leader-election",
	"--leader-election-lease-duration=6s",
	"--leader-election-renew-deadline=5s",
	"--leader-election-retry-period=1s",
}

// Failover timing.
const (
	// failovers is how many leaders are killed.
	failovers = 3
	// takeoverTimeout bounds how long a standby takes to lead: a lease
	// duration and a few retry periods.
	takeoverTimeout = time.Minute
)

// TestLeaderFailover runs two controller replicas with leader election.
// Each round changes the servers, kills the leader with SIGKILL at a random
// moment, changes them again while nobody leads, waits for the standby to
// take over and checks the invariants once the new leader has reconciled
// every change; a new standby replaces the dead leader.
func TestLeaderFailover(t *testing.T) {
	ctx := t.Context()
	run := newRun(t, 3, leaseArgs...)
	run.faultKind = "leader kills"
	leader := run.procs.start(ctx)
	if err := waitLeader(ctx, leader, run.procs); err != nil {
		t.Fatal(err)
	}
	standby := run.procs.start(ctx)
	if err := run.fleet.fill(ctx); err != nil {
		t.Fatal(err)
	}
	for range failovers {
		if err := run.fleet.changeAll(ctx, changes...); err != nil {
			t.Fatal(err)
		}
		run.injectAfter(ctx, maxKillDelay, func() { run.procs.kill(leader) })
		for range 2 {
			if err := run.fleet.randomOp(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := waitLeader(ctx, standby, run.procs); err != nil {
			t.Fatal(err)
		}
		run.settle(ctx)
		leader, standby = standby, run.procs.start(ctx)
		run.cycles++
	}
	run.finish(ctx)
}

// waitLeader waits until proc leads, failing if another running replica
// leads at the same time.
func waitLeader(ctx context.Context, proc *harness.ControllerProcess, procs *processes) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollEvery, takeoverTimeout, true, func(ctx context.Context) (bool, error) {
		leaders := 0
		for _, running := range procs.runningProcesses() {
			if isLeader(ctx, running) {
				leaders++
			}
		}
		if leaders > 1 {
			return false, fmt.Errorf("%d replicas lead at once", leaders)
		}
		last = fmt.Errorf("controller pid %d does not lead", proc.PID())
		return isLeader(ctx, proc), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for a new leader: %w (last: %w)", err, last)
	}
	return nil
}
