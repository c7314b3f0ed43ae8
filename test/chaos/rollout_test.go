package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/rollout"
)

// rollingReplicas is the replicas of the server whose changes roll.
const rollingReplicas = 3

// TestControllerKilledInTheMiddleOfEachStorageChange runs a 3-replica
// PerReplica server, whose bindings retire at once, through each change of
// its cache (retainFor to 1s, so the teardown drains; revision, size,
// class, mode) and kills the controller in the middle of each: once the new
// StatefulSet exists beside the old one, or at a random moment for
// retainFor, which starts none.
// After each change the namespace must converge with every invariant
// holding (the change completes); at the end no claim was deleted while
// its binding needed it or a pod mounted it.
func TestControllerKilledInTheMiddleOfEachStorageChange(t *testing.T) {
	ctx := t.Context()
	run := newRun(t, 1)
	run.faultKind = "controller kills mid-change"
	proc := run.procs.start(ctx)
	server := fixtures.EmbeddingServer(run.namespace, "s0", fixtures.WithReplicas(rollingReplicas),
		fixtures.WithCacheSize("1Gi"), fixtures.WithRetainFor(0))
	if err := cluster.Client.Create(ctx, server); err != nil {
		t.Fatal(err)
	}
	run.fleet.slots[0] = server.Name
	run.settle(ctx)
	for _, c := range rollout.Changes(time.Second, fastClass) {
		if err := run.fleet.update(ctx, server.Name, change{name: c.Name, apply: func(_ *fleet, s *embedopsv1.EmbeddingServer) { c.Apply(s) }}); err != nil {
			t.Fatal(err)
		}
		if c.Rolls {
			if err := waitForStatefulSets(ctx, run.namespace, server.Name, 2); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			run.procs.kill(proc)
			run.faults++
		} else {
			run.injectAfter(ctx, maxKillDelay, func() { run.procs.kill(proc) })
		}
		proc = run.procs.start(ctx)
		run.cycles++
		run.settle(ctx)
	}
	run.finish(ctx)
}

// waitForStatefulSets waits until the server has n StatefulSets: a change
// of storage is rolling.
func waitForStatefulSets(ctx context.Context, namespace, server string, n int) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, settleTimeout, true, func(ctx context.Context) (bool, error) {
		var list appsv1.StatefulSetList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{embedopsv1.NameLabel: server}); err != nil {
			return false, nil
		}
		return len(list.Items) >= n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d StatefulSets of %s: %w", n, server, err)
	}
	return nil
}
