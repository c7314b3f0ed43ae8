package harness

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"golang.org/x/sys/unix"
)

// changedSysctls are the host settings the node changes, restored at
// Stop: the kubelet sets the first three unless protectKernelDefaults
// (REAL-NODE.md); ip_forward is per network namespace (the bridge plugin
// sets the node's), recorded to show the host's stays as it was.
var changedSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"}

// Host paths the node's components write outside its directory:
// containerd 1.6 keeps shim sockets in /run/containerd/s whatever its
// state directory, and the kubelet links container logs from
// /var/log/containers and keeps device plugin sockets under
// /var/lib/kubelet whatever its podLogsDir and root directory.
const (
	containerdRunDir  = "/run/containerd"
	shimSocketDir     = containerdRunDir + "/s"
	containerLogLinks = "/var/log/containers"
	kubeletDefaultDir = "/var/lib/kubelet"
	// podLogsDefaultDir is the kubelet's default podLogsDir, recorded to
	// show that the node's podLogsDir keeps it untouched.
	podLogsDefaultDir = "/var/log/pods"
)

// kubeletDeviceManagerFiles are what the kubelet's device manager keeps
// under /var/lib/kubelet whatever its root directory (its socket path is
// the device plugin API's constant). Two nodes at once share them; a node
// uses no device plugin.
var kubeletDeviceManagerFiles = []string{"device-plugins/kubelet.sock", "device-plugins/kubelet_internal_checkpoint"}

// hostState is what the node found on the host before it started, kept
// in the node's directory so a later run can restore it after a crash.
type hostState struct {
	Sysctls map[string]string `json:"sysctls"`
	// Existed records which of the host paths existed.
	Existed map[string]bool `json:"existed"`
	// Cgroup is the node's cgroup and the directories it created.
	Cgroup *nodeCgroup `json:"cgroup"`
}

// recordHost reads the host's state.
func recordHost() (*hostState, error) {
	s := &hostState{Sysctls: map[string]string{}, Existed: map[string]bool{}}
	for _, name := range changedSysctls {
		value, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err != nil {
			return nil, fmt.Errorf("reading the sysctl %s: %w", name, err)
		}
		s.Sysctls[name] = strings.TrimSpace(string(value))
	}
	for _, path := range []string{containerdRunDir, shimSocketDir, containerLogLinks, kubeletDefaultDir, podLogsDefaultDir} {
		_, err := os.Lstat(path)
		s.Existed[path] = err == nil
	}
	return s, nil
}

// save writes the state to dir/host.json.
func (s *hostState) save(dir string) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding the host state: %w", err)
	}
	return writeFiles(map[string][]byte{filepath.Join(dir, "host.json"): data})
}

// loadHostState reads dir/host.json.
func loadHostState(dir string) (*hostState, error) {
	data, err := os.ReadFile(filepath.Join(dir, "host.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the node's host state: %w", err)
	}
	s := &hostState{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("decoding the node's host state: %w", err)
	}
	return s, nil
}

// restoreSysctls writes back every sysctl that changed.
func (s *hostState) restoreSysctls() error {
	var errs []error
	for name, want := range s.Sysctls {
		path := filepath.Join("/proc/sys", name)
		got, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(got)) == want {
			continue
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring the sysctl %s=%s: %w", name, want, err))
		}
	}
	return errors.Join(errs...)
}

// removeHostPaths removes what the node left outside its directory: its
// container log links, its shim sockets, and the host directories it
// created, once empty.
func (s *hostState) removeHostPaths(dir string, shimSockets []string) error {
	var errs []error
	links, _ := filepath.Glob(filepath.Join(containerLogLinks, "*.log"))
	for _, link := range links {
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, dir+"/") {
			errs = append(errs, ignoreMissing(os.Remove(link)))
		}
	}
	for _, socket := range shimSockets {
		errs = append(errs, ignoreMissing(os.Remove(socket)))
	}
	if !s.Existed[kubeletDefaultDir] {
		for _, file := range kubeletDeviceManagerFiles {
			errs = append(errs, ignoreMissing(os.Remove(filepath.Join(kubeletDefaultDir, file))))
		}
	}
	for _, path := range []string{containerLogLinks, shimSocketDir, containerdRunDir, kubeletDefaultDir} {
		if !s.Existed[path] {
			errs = append(errs, removeEmptyTree(path))
		}
	}
	return errors.Join(errs...)
}

// removeEmptyTree removes path if it holds nothing but empty directories.
func removeEmptyTree(path string) error {
	var dirs []string
	err := filepath.WalkDir(path, func(p string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !entry.IsDir() {
			return fmt.Errorf("%s is left behind", p)
		}
		dirs = append(dirs, p)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Remove(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	return nil
}

// ignoreMissing drops a not-exist error.
func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	point, fsType string
}

// mountInfo lists the mounts of the process's mount namespace in mount
// order.
func mountInfo() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer func() { _ = f.Close() }()
	var mounts []mount
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		// id parent major:minor root point options [optional...] - type source super
		fields := strings.Fields(scanner.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		mounts = append(mounts, mount{point: unescapeMount(fields[4]), fsType: fields[sep+1]})
	}
	return mounts, scanner.Err()
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	unquoted, err := strconv.Unquote(`"` + s + `"`)
	if err != nil {
		return s
	}
	return unquoted
}

// mountsUnder lists the mount points at or below dir, innermost last.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := mountInfo()
	if err != nil {
		return nil, err
	}
	var points []string
	for _, m := range mounts {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			points = append(points, m.point)
		}
	}
	return points, nil
}

// unmountUnder detaches every mount at or below dir (the kubelet's volume
// and rshared root mounts, containerd's rootfs, shm and network namespace
// mounts), newest first, until none is left.
func unmountUnder(dir string) error {
	for range 10 {
		points, err := mountsUnder(dir)
		if err != nil || len(points) == 0 {
			return err
		}
		slices.Reverse(points)
		for _, point := range points {
			_ = unix.Unmount(point, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
	}
	points, err := mountsUnder(dir)
	if err == nil && len(points) > 0 {
		err = fmt.Errorf("mounts are left under %s: %s", dir, strings.Join(points, ", "))
	}
	return err
}

// shimProcesses lists the containerd shims serving the containerd at
// socket (containerd-shim-runc-v2 runs with -address <socket>, and outlives
// containerd) and the sockets they bind, named from their -namespace and
// -id as shimSockets names a task's: a shim whose task containerd already
// deleted, killed before it removed its socket, leaves one no task names.
func shimProcesses(socket string) (pids []int, sockets []string) {
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if flagValue(args, "-address") != socket {
			continue
		}
		pids = append(pids, pid)
		if namespace, id := flagValue(args, "-namespace"), flagValue(args, "-id"); namespace != "" && id != "" {
			sockets = append(sockets, shimSocket(socket, namespace, id))
		}
	}
	return pids, sockets
}

// flagValue is the value after flag in args, empty when there is none.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// shimSockets are the sockets containerd 1.6's shims bind for the tasks
// under state (shimSocket).
func shimSockets(state, socket string) []string {
	var sockets []string
	namespaces, _ := os.ReadDir(filepath.Join(state, "io.containerd.runtime.v2.task"))
	for _, ns := range namespaces {
		tasks, _ := os.ReadDir(filepath.Join(state, "io.containerd.runtime.v2.task", ns.Name()))
		for _, task := range tasks {
			sockets = append(sockets, shimSocket(socket, ns.Name(), task.Name()))
		}
	}
	return sockets
}

// shimSocket is the socket a shim of the containerd at socket binds for
// the task id in namespace: /run/containerd/s/<sha256 of socket/namespace/id>
// (containerd 1.6 runtime/v2/shim/util_unix.go SocketAddress).
func shimSocket(socket, namespace, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(socket, namespace, id)))
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum))
}

// killAll sends SIGKILL to pids and waits for them to go.
func killAll(pids []int) error {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return waitForExit(pids)
}

// waitForExit polls, up to processStopTimeout, until each process is gone
// or a zombie (they are not this process's children, so it cannot wait
// for them), and names those still running after it.
func waitForExit(pids []int) error {
	var running []int
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, processStopTimeout, true,
		func(context.Context) (bool, error) {
			running = slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !alive(pid) })
			return len(running) == 0, nil
		})
	if err != nil {
		return fmt.Errorf("processes %v still run %s after SIGKILL", running, processStopTimeout)
	}
	return nil
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
