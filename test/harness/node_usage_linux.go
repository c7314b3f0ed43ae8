package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryUsage is the node's memory in bytes: each component's resident
// set, the containerd shims' together ("shims"), and the pods' cgroup
// ("pods", memory.usage_in_bytes of the node's cgroup on cgroup v1).
func (n *Node) MemoryUsage() map[string]uint64 {
	usage := map[string]uint64{}
	for _, p := range n.processes {
		usage[p.Name] = residentBytes(p.PID())
	}
	pids, _ := shimProcesses(containerdSocket(n.files.containerdDir))
	for _, pid := range pids {
		usage["shims"] += residentBytes(pid)
	}
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", n.host.Cgroup.Path, "memory.usage_in_bytes"))
	if err == nil {
		usage["pods"], _ = strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	}
	return usage
}

// residentBytes is a process's VmRSS, 0 when it is gone.
func residentBytes(pid int) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kib * 1024
		}
	}
	return 0
}

// SaveLogs copies the components' logs and the pods' (the kubelet's
// podLogsDir, pods/<namespace>_<pod>_<uid>/<container>/<n>.log) to dir,
// which outlives Stop, for a failed run's diagnosis.
func (n *Node) SaveLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	logs, _ := filepath.Glob(n.files.path("*.log"))
	for _, log := range logs {
		if err := copyLog(log, filepath.Join(dir, filepath.Base(log))); err != nil {
			return err
		}
	}
	return filepath.WalkDir(n.files.podLogsDir, func(path string, entry os.DirEntry, err error) error {
		if err != nil || entry.IsDir() {
			return err
		}
		rel, err := filepath.Rel(n.files.podLogsDir, path)
		if err != nil {
			return err
		}
		return copyLog(path, filepath.Join(dir, "pods", rel))
	})
}

// copyLog copies a log file, creating its directory.
func copyLog(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("reading %s: %w", from, err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(to), err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		return fmt.Errorf("saving %s: %w", from, err)
	}
	return nil
}
