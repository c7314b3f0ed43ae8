package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/util/wait"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// waitFor polls snapshots until done accepts one and returns the last. On
// timeout it says why the last snapshot was refused, or else why none
// could be taken.
func (r *chaosRun) waitFor(ctx context.Context, what string, timeout time.Duration, done func(*Snapshot) error) (*Snapshot, error) {
	var snapshot *Snapshot
	var refused, failed error
	err := wait.PollUntilContextTimeout(ctx, pollEvery, timeout, true, func(ctx context.Context) (bool, error) {
		r.restartExitedComponents(ctx)
		s, err := TakeSnapshot(ctx, cluster.Client, r.namespace)
		if err != nil {
			failed = err
			return false, nil
		}
		snapshot, refused = s, done(s)
		return refused == nil, nil
	})
	if err != nil {
		return snapshot, fmt.Errorf("waiting for %s: %w (last: %w)", what, err, cmp.Or(refused, failed))
	}
	return snapshot, nil
}

// restartExitedComponents starts the cluster's components that exited
// while the run waits, as a kubelet restarts static pods: a
// kube-controller-manager that lost its lease on a loaded machine would
// otherwise bind no claim again, and the run would judge it, not embedops.
// Each restart is logged with the component's last words.
func (r *chaosRun) restartExitedComponents(ctx context.Context) {
	if len(cluster.StoppedComponents()) == 0 {
		return
	}
	logs := cluster.ComponentLogs(logTail)
	started, err := cluster.StartExited(ctx)
	if err != nil {
		r.t.Errorf("%v\n%s", err, logs)
		return
	}
	if len(started) > 0 {
		r.t.Logf("started %v again: it exited while the run waited\n%s", started, logs)
	}
}

// converged accepts a namespace whose servers are all Ready at their
// generation, using their binding, with no binding Retiring and every
// invariant holding.
func converged(s *Snapshot) error {
	var errs []error
	for i := range s.Servers {
		server := &s.Servers[i]
		switch {
		case server.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("server %s is being deleted", server.Name))
		case server.Status.ObservedGeneration != server.Generation:
			errs = append(errs, fmt.Errorf("server %s: generation %d observed %d", server.Name, server.Generation, server.Status.ObservedGeneration))
		case !conditions.IsTrue(server, embedopsv1.ReadyCondition):
			errs = append(errs, fmt.Errorf("server %s is not Ready: %s", server.Name, conditions.GetMessage(server, embedopsv1.ReadyCondition)))
		}
	}
	for _, binding := range s.Bindings {
		if binding.Status.Phase == embedopsv1.BindingRetiring {
			errs = append(errs, fmt.Errorf("binding %s is Retiring", binding.Name))
		}
	}
	for _, v := range Check(s) {
		errs = append(errs, errors.New(v))
	}
	return errors.Join(errs...)
}

// drained accepts a namespace with no server, no claim and only Released
// bindings.
func drained(s *Snapshot) error {
	var left []string
	for _, server := range s.Servers {
		left = append(left, "server "+server.Name)
	}
	for _, binding := range s.Bindings {
		if binding.Status.Phase != embedopsv1.BindingReleased {
			left = append(left, fmt.Sprintf("binding %s (%s, %d references)", binding.Name, binding.Status.Phase, len(binding.Status.RequestReferences)))
		}
	}
	for _, claim := range s.Claims {
		left = append(left, "claim "+claim.Name)
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %s", strings.Join(left, ", "))
	}
	return nil
}
