package main

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// downTimeout bounds how long down waits for up to stop everything.
const downTimeout = 2 * time.Minute

// down asks the running up to stop, as Ctrl-C would, and waits until it
// has stopped every process and removed its state.
func down(ctx context.Context, out io.Writer, stateFile string) error {
	st, err := readState(stateFile)
	if err != nil {
		fmt.Fprintln(out, "dev-down: no make dev is running")
		return nil
	}
	if !running(st.PID) {
		removeStale(st)
		fmt.Fprintf(out, "dev-down: make dev (pid %d) was not running; removed what it left\n", st.PID)
		return removeStateFile(stateFile)
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping make dev (pid %d): %w", st.PID, err)
	}
	fmt.Fprintf(out, "dev-down: asked make dev (pid %d) to stop\n", st.PID)
	err = wait.PollUntilContextTimeout(ctx, pollInterval, downTimeout, true, func(context.Context) (bool, error) {
		return !running(st.PID), nil
	})
	if err != nil {
		return fmt.Errorf("make dev (pid %d) did not stop within %s: %w", st.PID, downTimeout, err)
	}
	fmt.Fprintln(out, "dev-down: stopped")
	return nil
}
