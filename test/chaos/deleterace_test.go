package chaos

import (
	"testing"
	"time"
)

// Deletion race timing.
const (
	// deleteRaces is how many servers are deleted during their first
	// reconcile.
	deleteRaces = 20
	// maxDeleteDelay bounds the random time between creating a server and
	// deleting it: about one first reconcile on 2 cores.
	maxDeleteDelay = 400 * time.Millisecond
)

// TestServerDeletedDuringFirstReconcile creates servers and deletes each at
// a random moment of its first reconcile, while the controller runs
// undisturbed, then checks that no binding keeps a reference to a server
// that is gone and that everything drains.
func TestServerDeletedDuringFirstReconcile(t *testing.T) {
	ctx := t.Context()
	run := newRun(t, 1)
	run.faultKind = "deletions mid-reconcile"
	run.procs.start(ctx)
	for range deleteRaces {
		if err := run.fleet.create(ctx, 0); err != nil {
			t.Fatal(err)
		}
		run.injectAfter(ctx, maxDeleteDelay, func() {
			if err := run.fleet.delete(ctx, 0); err != nil {
				t.Fatal(err)
			}
		})
		run.cycles++
	}
	run.finish(ctx)
}
