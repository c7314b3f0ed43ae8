package chaos

import (
	"testing"
	"time"
)

// maxKillDelay bounds the random time between a cycle's changes and the
// kill: long enough for a restarted controller to sync and reconcile, short
// enough for kills to land mid-reconcile.
const maxKillDelay = 2 * time.Second

// TestControllerKilledAtRandomPoints runs -chaos.cycles cycles of one or
// two random changes (create, change class, model, replicas or mode,
// delete) each followed by a SIGKILL of the controller at a random moment
// and a restart, then lets the namespace converge and checks the
// invariants.
func TestControllerKilledAtRandomPoints(t *testing.T) {
	ctx := t.Context()
	run := newRun(t, 3)
	run.faultKind = "controller kills"
	proc := run.procs.start(ctx)
	for range *cycles {
		for range 1 + run.rng.IntN(2) {
			if err := run.fleet.randomOp(ctx); err != nil {
				t.Fatal(err)
			}
		}
		run.injectAfter(ctx, maxKillDelay, func() { run.procs.kill(proc) })
		proc = run.procs.start(ctx)
		run.cycles++
	}
	run.finish(ctx)
}
