package main

import "context"

// backendThread runs the model's work one command at a time, as TEI's backend
// thread does: /health is BackendCommand::Health, sent down the same
// channel as the embedding batches (TEI v1.9 backends/src/lib.rs), so a
// busy server answers it only after the batches queued before it.
type backendThread struct {
	commands chan func()
}

// startBackendThread starts the backend's one worker, which runs for the life of
// the process, as TEI's backend thread does.
func startBackendThread() *backendThread {
	b := &backendThread{commands: make(chan func())}
	go func() {
		for command := range b.commands {
			command()
		}
	}()
	return b
}

// do runs command on the backend after the commands before it, and waits
// for it; ctx bounds only the wait for the backend.
func (b *backendThread) do(ctx context.Context, command func()) error {
	done := make(chan struct{})
	select {
	case b.commands <- func() { command(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}
