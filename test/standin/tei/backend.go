package main

import (
	"context"
	"errors"
	"sync/atomic"
)

// backendQueue is how many commands wait for the backend thread before a
// sender waits too: TEI's `mpsc::channel(8)` (v1.9 backends/src/lib.rs,
// Backend::new).
const backendQueue = 8

// errBackendDead is what every command of a dead backend fails with.
var errBackendDead = errors.New("the backend died (" + BackendDiesAtVariable + ")")

// backendThread runs the model's work one command at a time, as TEI's backend
// thread does: /health is BackendCommand::Health, sent down the same
// channel as the embedding batches (TEI v1.9 backends/src/lib.rs), so a
// busy server answers it only after the batches queued before it.
type backendThread struct {
	commands chan func()
	// finished counts the commands that ran.
	finished atomic.Int64
	// diesAt is the batch at which the backend dies, 0 for never
	// (BackendDiesAtVariable). batches and dead are the thread's own:
	// only commands read and write them.
	diesAt  int
	batches int
	dead    bool
}

// startBackendThread starts the backend's one worker, which runs for the life of
// the process, as TEI's backend thread does. It dies at batch diesAt
// (0: never).
func startBackendThread(diesAt int) *backendThread {
	b := &backendThread{commands: make(chan func(), backendQueue), diesAt: diesAt}
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

// health runs TEI's health check in its turn: it fails at once on a dead
// backend, as TEI's one-token batch does once a batch failed (v1.9.3
// backends/src/lib.rs, Backend::health when the health watch is false).
func (b *backendThread) health(ctx context.Context) error {
	var dead bool
	if err := b.do(ctx, func() { dead = b.dead }); err != nil {
		return err
	}
	if dead {
		return errBackendDead
	}
	return nil
}

// embed runs batch in its turn unless the backend is dead. The backend
// dies at its diesAt-th batch, which fails, and fails every batch after
// it, as TEI's does after a CUDA error, while the router keeps serving.
func (b *backendThread) embed(ctx context.Context, batch func()) error {
	var dead bool
	err := b.do(ctx, func() {
		b.batches++
		b.dead = b.dead || b.batches == b.diesAt
		if dead = b.dead; !dead {
			batch()
		}
	})
	if err != nil {
		return err
	}
	if dead {
		return errBackendDead
	}
	return nil
}

// queued is how many commands wait for the thread, the one it runs aside.
func (b *backendThread) queued() int { return len(b.commands) }
