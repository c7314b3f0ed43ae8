package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` bind-mounts named network namespaces.
const netnsDir = "/run/netns"

// nodeNetwork is the real node's network namespace: loopback, which also
// holds NodeAddress (this kernel has no dummy link type: "Unknown device
// type"; an address on lo is as local as on any link). Every node process runs inside it, so the
// API server, the kubelet, the pods' bridge and kube-proxy's iptables
// rules exist only there; the namespace has no route to any other address
// (issue 24's network rule). The test process reaches it only through
// dial.
type nodeNetwork struct {
	name string
	// thread runs every node process's fork: a child inherits the network
	// namespace of the thread that forks it, and dies (Pdeathsig) when that
	// thread exits, so it lives until the node stops.
	thread *netnsThread
}

// createNodeNetwork creates the named network namespace with loopback up,
// holding NodeAddress.
func createNodeNetwork(name string) (*nodeNetwork, error) {
	steps := [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "addr", "add", NodeAddress + "/32", "dev", "lo"},
	}
	n := &nodeNetwork{name: name}
	for _, args := range steps {
		if err := runIP(args...); err != nil {
			return nil, errors.Join(err, n.delete())
		}
	}
	thread, err := startNetnsThread(n.path())
	if err != nil {
		return nil, errors.Join(err, n.delete())
	}
	n.thread = thread
	return n, nil
}

// path is the namespace's bind mount.
func (n *nodeNetwork) path() string { return filepath.Join(netnsDir, n.name) }

// start starts cmd inside the namespace.
func (n *nodeNetwork) start(cmd *exec.Cmd) error {
	var err error
	n.thread.do(func() { err = cmd.Start() })
	return err
}

// dialDone, when a test sets it, is told the thread each dial ran on once
// the dial has left it.
var dialDone func(tid int)

// dial connects to address inside the namespace from a thread that enters
// it, then returns to the thread's own namespace; the socket stays in the
// node's namespace. The thread is unlocked only once it is back: one that
// cannot return ends with its goroutine, so no other goroutine runs in the
// node's namespace. Threads are not ended otherwise: a process the harness
// started from a thread dies with it (Pdeathsig, process_linux.go), and Go
// hands any thread to a dial.
func (n *nodeNetwork) dial(ctx context.Context, network, address string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if dialDone != nil {
			defer dialDone(unix.Gettid())
		}
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			done <- result{err: fmt.Errorf("opening the thread's network namespace: %w", err)}
			runtime.UnlockOSThread()
			return
		}
		defer func() { _ = home.Close() }()
		if err := enterNetns(n.path()); err != nil {
			done <- result{err: err}
			runtime.UnlockOSThread() // a failed setns leaves the thread where it was
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, address)
		done <- result{conn, err}
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	r := <-done
	return r.conn, r.err
}

// delete ends the namespace's thread and removes the namespace, which
// takes its links, the pods' bridge and veth ends and its iptables rules
// with it. Deleting a missing namespace does nothing.
func (n *nodeNetwork) delete() error {
	if n.thread != nil {
		n.thread.stop()
	}
	if _, err := os.Stat(n.path()); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return runIP("netns", "delete", n.name)
}

// runIP runs iproute2's ip.
func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// enterNetns moves the calling thread into the network namespace at path;
// the caller has locked its goroutine to the thread.
func enterNetns(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening the network namespace: %w", err)
	}
	defer func() { _ = f.Close() }()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering the network namespace %s: %w", path, err)
	}
	return nil
}

// netnsThread is an OS thread inside a network namespace running the
// functions given to do, one at a time, until stop. Go creates new threads
// from a clean template thread while this one is locked, so the namespace
// leaks into no other goroutine.
type netnsThread struct {
	work chan func()
	once sync.Once
	done chan struct{}
}

// startNetnsThread starts a thread inside the network namespace at path.
func startNetnsThread(path string) (*netnsThread, error) {
	t := &netnsThread{work: make(chan func()), done: make(chan struct{})}
	entered := make(chan error, 1)
	go func() {
		defer close(t.done)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := enterNetns(path); err != nil {
			entered <- err
			return
		}
		entered <- nil
		for fn := range t.work {
			fn()
		}
	}()
	if err := <-entered; err != nil {
		return nil, err
	}
	return t, nil
}

// do runs fn on the thread and waits for it.
func (t *netnsThread) do(fn func()) {
	finished := make(chan struct{})
	t.work <- func() { defer close(finished); fn() }
	<-finished
}

// stop ends the thread; the node's processes must have exited, since the
// kernel kills what the thread started when it exits.
func (t *netnsThread) stop() {
	t.once.Do(func() { close(t.work) })
	<-t.done
}

// forwarder accepts connections on a 127.0.0.1 port of the test process's
// namespace and relays each to target inside the node's namespace.
type forwarder struct {
	listener net.Listener
	dial     func(context.Context, string, string) (net.Conn, error)
	target   string
	wg       sync.WaitGroup
	mu       sync.Mutex
	// conns are the open connections on both sides; a socket left open
	// would keep the node's namespace alive after it is deleted.
	conns map[net.Conn]struct{}
}

// startForwarder listens on a free loopback port and relays to target.
func startForwarder(dial func(context.Context, string, string) (net.Conn, error), target string) (*forwarder, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the API server forwarder: %w", err)
	}
	f := &forwarder{listener: listener, dial: dial, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.serve)
	return f, nil
}

// addr is the loopback address the forwarder listens on.
func (f *forwarder) addr() string { return f.listener.Addr().String() }

// serve accepts until the listener closes.
func (f *forwarder) serve() {
	for {
		conn, err := f.listener.Accept()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.relay(conn) })
	}
}

// relay copies between conn and a new connection to the target until
// either side closes.
func (f *forwarder) relay(conn net.Conn) {
	defer f.forget(conn)
	if !f.track(conn) {
		return
	}
	upstream, err := f.dial(context.Background(), "tcp", f.target)
	if err != nil {
		return
	}
	defer f.forget(upstream)
	if !f.track(upstream) {
		return
	}
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); copied <- struct{}{} }()
	<-copied
}

// track records an open connection; it reports false, and closes conn,
// once the forwarder is closed.
func (f *forwarder) track(conn net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		_ = conn.Close()
		return false
	}
	f.conns[conn] = struct{}{}
	return true
}

// forget closes conn and drops it.
func (f *forwarder) forget(conn net.Conn) {
	_ = conn.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, conn)
}

// close stops accepting, closes every open connection and waits for the
// relays to end.
func (f *forwarder) close() {
	_ = f.listener.Close()
	f.mu.Lock()
	for conn := range f.conns {
		_ = conn.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
