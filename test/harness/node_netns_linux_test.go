//go:build linux

package harness

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
)

// TestDialLeavesItsThreadAliveAtHome: a dial into the node's namespace
// returns its thread to the test process's namespace and leaves it
// running. A thread that ended would kill every process the harness had
// started from it (Pdeathsig): Flux and the controller died that way while
// a node ran.
func TestDialLeavesItsThreadAliveAtHome(t *testing.T) {
	if reason := NodeUnsupported(); reason != "" {
		t.Skip(reason)
	}
	g := NewWithT(t)
	n, err := createNodeNetwork(fmt.Sprintf("%sdial-%d", nodeNamePrefix, os.Getpid()))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(n.delete()).To(Succeed()) })
	var listener net.Listener
	n.thread.do(func() { listener, err = net.Listen("tcp", NodeAddress+":0") })
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = listener.Close() })
	go func() {
		if conn, err := listener.Accept(); err == nil {
			_ = conn.Close()
		}
	}()
	threads := make(chan int, 1)
	dialDone = func(tid int) {
		select {
		case threads <- tid:
		default: // the first dial's thread is the one checked
		}
	}
	t.Cleanup(func() { dialDone = nil })

	conn, err := n.dial(t.Context(), "tcp", listener.Addr().String())

	g.Expect(err).NotTo(HaveOccurred(), "the listener is only inside the node's namespace")
	_ = conn.Close()
	tid := <-threads
	// The test's own thread's namespace: /proc/self is the main thread's,
	// which may be the one the node's namespace thread runs on.
	runtime.LockOSThread()
	home, err := os.Readlink("/proc/thread-self/ns/net")
	runtime.UnlockOSThread()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", tid))).To(Equal(home),
		"the dial's thread is alive, back in the test process's namespace")
}
