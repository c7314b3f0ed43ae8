package main

import (
	"os"
	"syscall"
)

// sleep waits on signals: it returns on SIGINT or SIGTERM, and on SIGCHLD
// calls reap, passing each child reaped to reaped if it is not nil
// (pause.c: sigdown and sigreap).
func sleep(signals <-chan os.Signal, reap func() []int, reaped chan<- int) {
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		for _, pid := range reap() {
			if reaped != nil {
				reaped <- pid
			}
		}
	}
}

// reapAll waits for every child that has exited, without blocking
// (pause.c sigreap: `while (waitpid(-1, NULL, WNOHANG) > 0)`).
func reapAll() []int {
	var pids []int
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return pids
		}
		pids = append(pids, pid)
	}
}
