package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// nodeRuntimeCommands are what the node runs from Debian's packages
// (`make tools` installs them as root).
var nodeRuntimeCommands = []string{"containerd", "ctr", "containerd-shim-runc-v2", "runc", "iptables", "iptables-restore", "ip", "mount"}

// nodeCNIPlugins are the CNI plugins the node's pod network uses
// (containerd runs loopback for every pod).
var nodeCNIPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// NodeUnsupported says why this machine cannot run a real node, or ""
// when it can: the node needs root (network namespaces, mounts, cgroups)
// and mounted cgroups.
func NodeUnsupported() string {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Sprintf("a real node needs root for network namespaces, mounts and cgroups; this test runs as uid %d", uid)
	}
	if _, err := cgroupMounts(); err != nil {
		return "a real node needs cgroups: " + err.Error()
	}
	return ""
}

// checkNodeRuntime fails when a program of the node's Debian packages is
// missing.
func checkNodeRuntime() error {
	var missing []string
	for _, name := range nodeRuntimeCommands {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	for _, name := range nodeCNIPlugins {
		if _, err := os.Stat(filepath.Join(cniBinDir, name)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node's runtime is missing %s: run 'make tools' as root (it installs containerd, runc, containernetworking-plugins, iptables)", strings.Join(missing, ", "))
	}
	return nil
}

// Stop ends every component, removes the pods, the node's mounts, network
// namespace and cgroups, restores the host's sysctls and removes the
// node's directory. It is safe to call more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.stopErr = n.stop()
		untrackNode(n)
		unlockNodeHost()
	})
	return n.stopErr
}

// stop ends the node in order: the provisioner and the node agents, the
// containers (SIGKILL through their cgroups) and their shims, containerd
// and the control plane, then the host's state.
func (n *Node) stop() error {
	var errs []error
	if n.stopProvisioner != nil {
		n.stopProvisioner()
	}
	agents, rest := n.splitProcesses()
	errs = append(errs, stopProcesses(agents))
	var sockets []string
	if n.host != nil {
		errs = append(errs, n.host.Cgroup.kill())
		socket := containerdSocket(n.files.containerdDir)
		pids, shimBound := shimProcesses(socket)
		sockets = append(shimSockets(filepath.Join(n.files.containerdDir, "state"), socket), shimBound...)
		errs = append(errs, killAll(pids))
	}
	errs = append(errs, stopProcesses(rest))
	if n.forwarder != nil {
		n.forwarder.close()
	}
	if n.host != nil {
		errs = append(errs, teardownNode(n.Dir, n.network, n.host, sockets))
	} else if n.network != nil {
		errs = append(errs, n.network.delete())
	}
	return errors.Join(errs...)
}

// splitProcesses separates the node agents (kubelet, kube-proxy, CoreDNS),
// which stop before the containers are killed, from containerd and the
// control plane; both newest first.
func (n *Node) splitProcesses() (agents, rest []*Process) {
	for _, p := range slices.Backward(n.processes) {
		switch p.Name {
		case "kubelet", "kube-proxy", "coredns":
			agents = append(agents, p)
		default:
			rest = append(rest, p)
		}
	}
	return agents, rest
}

// stopProcesses stops each process in order.
func stopProcesses(processes []*Process) error {
	var errs []error
	for _, p := range processes {
		errs = append(errs, p.Stop())
	}
	return errors.Join(errs...)
}

// teardownNode undoes a node on the host once its processes are gone:
// mounts, network namespace, cgroups, sysctls, host paths, directory.
func teardownNode(dir string, network *nodeNetwork, host *hostState, sockets []string) error {
	errs := []error{unmountUnder(dir)}
	if network != nil {
		errs = append(errs, network.delete())
	}
	errs = append(errs, host.Cgroup.remove(), host.restoreSysctls(), host.removeHostPaths(dir, sockets))
	// Only a directory without mounts is removed: a mount left inside it
	// could lead RemoveAll outside.
	if points, err := mountsUnder(dir); err != nil || len(points) > 0 {
		return errors.Join(append(errs, fmt.Errorf("keeping %s: mounts are left in it", dir))...)
	}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}

// sweepStaleNodes tears down the nodes of test processes that died without
// stopping them (a panic, a test timeout, SIGKILL): their components died
// with them (Pdeathsig), but not their containers, shims, mounts,
// namespace and cgroups.
func sweepStaleNodes() {
	names := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		names[e.Name()] = true
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), nodeNamePrefix+"*"))
	for _, d := range dirs {
		names[filepath.Base(d)] = true
	}
	for name := range names {
		if owner, ok := nodeOwner(name); ok && !alive(owner) {
			_ = sweepNode(name)
		}
	}
}

// nodeOwner is the pid in a node's name: embedops-node-<pid>-<random>.
func nodeOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, nodeNamePrefix)
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil
}

// sweepNode tears down a dead process's node from its saved host state.
func sweepNode(name string) error {
	dir := filepath.Join(os.TempDir(), name)
	network := &nodeNetwork{name: name}
	host, err := loadHostState(dir)
	if err != nil {
		return errors.Join(err, unmountUnder(dir), network.delete())
	}
	containerd := filepath.Join(dir, "containerd")
	socket := containerdSocket(containerd)
	errs := []error{host.Cgroup.kill()}
	pids, shimBound := shimProcesses(socket)
	sockets := append(shimSockets(filepath.Join(containerd, "state"), socket), shimBound...)
	errs = append(errs, killAll(pids))
	return errors.Join(append(errs, teardownNode(dir, network, host, sockets))...)
}

// liveNodes are the nodes this process runs, stopped on SIGINT, SIGTERM
// or SIGHUP before the signal takes its course.
var liveNodes = struct {
	sync.Mutex
	nodes   map[*Node]struct{}
	watched bool
}{nodes: map[*Node]struct{}{}}

// trackNode records a starting node and watches for signals.
func trackNode(n *Node) {
	liveNodes.Lock()
	defer liveNodes.Unlock()
	liveNodes.nodes[n] = struct{}{}
	if liveNodes.watched {
		return
	}
	liveNodes.watched = true
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-signals
		stopLiveNodes()
		signal.Reset()
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
}

// untrackNode forgets a stopped node.
func untrackNode(n *Node) {
	liveNodes.Lock()
	defer liveNodes.Unlock()
	delete(liveNodes.nodes, n)
}

// stopLiveNodes stops every node this process runs.
func stopLiveNodes() {
	liveNodes.Lock()
	nodes := make([]*Node, 0, len(liveNodes.nodes))
	for n := range liveNodes.nodes {
		nodes = append(nodes, n)
	}
	liveNodes.Unlock()
	for _, n := range nodes {
		_ = n.Stop()
	}
}

// nodeHost serializes real nodes on the host: the kubelet's device
// manager socket and the host paths a node records are shared, so one node
// runs at a time across test processes (go test runs packages in
// parallel), held by an flock on nodeLockPath. Within a process the lock
// is counted, so a test may hold it around a node's whole life.
var nodeHost struct {
	sync.Mutex
	count int
	file  *os.File
}

// nodeLockPath is the host-wide lock file.
func nodeLockPath() string { return filepath.Join(os.TempDir(), "embedops-node.lock") }

// lockNodeHost takes the host-wide node lock, waiting for other processes'
// nodes to stop.
func lockNodeHost() error {
	nodeHost.Lock()
	defer nodeHost.Unlock()
	if nodeHost.count == 0 {
		f, err := os.OpenFile(nodeLockPath(), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return fmt.Errorf("opening the node lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			_ = f.Close()
			return fmt.Errorf("taking the node lock: %w", err)
		}
		nodeHost.file = f
	}
	nodeHost.count++
	return nil
}

// unlockNodeHost releases one hold of the node lock.
func unlockNodeHost() {
	nodeHost.Lock()
	defer nodeHost.Unlock()
	nodeHost.count--
	if nodeHost.count == 0 {
		_ = nodeHost.file.Close()
		nodeHost.file = nil
	}
}
