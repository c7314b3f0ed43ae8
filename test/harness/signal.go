package harness

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// StopOnSignal runs stop and exits with status 1 when the test binary gets
// SIGINT or SIGTERM (an interrupted `go test`, a CI job cancelled), so the
// processes, namespaces and mounts a TestMain started do not outlive it;
// the deferred teardown of TestMain never runs on a signal. The returned
// function ends the watch once TestMain tears down by itself.
func StopOnSignal(what string, stop func() error) (done func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	finished := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "harness: %s: stopping %s\n", sig, what)
			if err := stop(); err != nil {
				fmt.Fprintf(os.Stderr, "harness: stopping %s: %v\n", what, err)
			}
			os.Exit(1)
		case <-finished:
		}
	}()
	return func() {
		signal.Stop(signals)
		close(finished)
	}
}

// StartUnlessSignalled runs start with a context derived from parent that
// SIGINT and SIGTERM cancel while it runs: a start that fails tears down
// what it started (StartCluster, StartNode), so a signal halfway leaves
// nothing behind, where its default action would kill the process with the
// components running. StopOnSignal takes over once start returns.
func StartUnlessSignalled[T any](parent context.Context, start func(context.Context) (T, error)) (T, error) {
	ctx, stopSignals := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	started, err := start(ctx)
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		err = fmt.Errorf("stopped by a signal while starting: %w", err)
	}
	return started, err
}
