package harness

import (
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
