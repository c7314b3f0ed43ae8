package main

import "runtime"

// spawner starts processes on OS threads that outlive them. The harness
// starts processes with Pdeathsig, so the kernel kills a child when the
// thread that forked it ends; and while a real node runs, every connection
// into its network namespace (the API server's forwarder dials one per
// connection) ends the thread it ran on. A process forked from an ordinary
// thread, which Go later hands to such a dial, dies with it. Each start
// runs on a thread of its own, locked until release.
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
