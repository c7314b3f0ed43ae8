package main

import "runtime"

// spawner starts processes on OS threads that outlive them. The harness
// starts processes with Pdeathsig, so the kernel kills a child when the
// thread that forked it ends. A dial into a real node's network namespace
// returns its thread to the host namespace, but ends it when it cannot
// (harness node_netns_linux.go); a process forked from a thread Go later
// hands to such a dial would die with it, and make dev's GitOps tool and
// controller must not. Each start runs on a thread of its own, locked
// until release.
type spawner struct {
	release chan struct{}
}

// newSpawner returns a spawner whose threads are held until release.
func newSpawner() *spawner { return &spawner{release: make(chan struct{})} }

// run calls start on a thread no other goroutine will use, and keeps that
// thread until release.
func (s *spawner) run(start func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- start()
		<-s.release
		runtime.UnlockOSThread()
	}()
	return <-done
}

// close lets the threads go, once the processes they started stopped.
func (s *spawner) close() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}
