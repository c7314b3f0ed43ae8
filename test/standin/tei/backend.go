package main

import (
	"context"
	"sync/atomic"
)

// backendQueue is how many commands wait for the backend thread before a
// sender waits too: TEI's `mpsc::channel(8)` (v1.9 backends/src/lib.rs,
// Backend::new).
const backendQueue = 8

// backendThread runs the model's work one command at a time, as TEI's backend
// thread does: /health is BackendCommand::Health, sent down the same
// channel as the embedding batches (TEI v1.9 backends/src/lib.rs), so a
// busy server answers it only after the batches queued before it.
type backendThread struct {
	commands chan func()
	// finished counts the commands that ran.
	finished atomic.Int64
}

// startBackendThread starts the backend's one worker, which runs for the life of
// the process, as TEI's backend thread does.
func startBackendThread() *backendThread {
	b := &backendThread{commands: make(chan func(), backendQueue)}
	go func() {
		for command := range b.commands {
			command()
		}
	}()
	return b
}

// do queues command behind the commands before it and waits until it ran.
// ctx bounds only the wait: a command once queued runs anyway, as a TEI
// command once sent does.
func (b *backendThread) do(ctx context.Context, command func()) error {
	done := make(chan struct{})
	select {
	case b.commands <- func() { command(); b.finished.Add(1); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// queued is how many commands wait for the thread, the one it runs aside.
func (b *backendThread) queued() int { return len(b.commands) }
