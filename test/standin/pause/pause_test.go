package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSleepReapsChildrenUntilTerminated(t *testing.T) {
	g := NewWithT(t)
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGCHLD)
	defer signal.Stop(signals)
	reaped := make(chan int, 8)
	ended := make(chan struct{})
	go func() {
		sleep(signals, reapAll, reaped)
		close(ended)
	}()

	// A child nobody waits for: pause reaps it when its SIGCHLD comes.
	child := exec.Command("true")
	g.Expect(child.Start()).To(Succeed())
	g.Expect(<-reaped).To(Equal(child.Process.Pid))

	signals <- syscall.SIGTERM
	<-ended
}

func TestSleepEndsOnInterrupt(t *testing.T) {
	signals := make(chan os.Signal, 1)
	signals <- syscall.SIGINT
	sleep(signals, func() []int { t.Fatal("nothing to reap"); return nil }, nil)
}

func TestReapAllReturnsWithoutChildren(t *testing.T) {
	g := NewWithT(t)
	g.Expect(reapAll()).To(BeEmpty())
}
