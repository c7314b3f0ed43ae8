package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/util/wait"
)

// clusterDir is the directory kwokctl keeps the cluster in: configuration,
// PKI, etcd data, binaries, logs and pid files.
func (c *Cluster) clusterDir() string {
	return filepath.Join(c.dir, "kwok", "clusters", c.Name)
}

// AuditLogPath is where kube-apiserver writes its audit log when the
// cluster was started with ClusterOptions.AuditPolicy.
func (c *Cluster) AuditLogPath() string {
	return filepath.Join(c.clusterDir(), "logs", "audit.log")
}

// componentPIDs reads the pid files kwokctl writes for the components it
// starts, by component name.
func (c *Cluster) componentPIDs() map[string]int {
	pids := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(c.clusterDir(), "pids", "*.pid"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			pids[strings.TrimSuffix(filepath.Base(file), ".pid")] = pid
		}
	}
	return pids
}

// endComponents waits for the components to exit (kwokctl delete kills
// them without waiting), then kills any left and fails naming them.
func (c *Cluster) endComponents(ctx context.Context, pids map[string]int) error {
	running := func() []string {
		var names []string
		for name, pid := range pids {
			if c.isComponent(pid) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	_ = wait.PollUntilContextCancel(ctx, pollInterval/2, true, func(context.Context) (bool, error) {
		return len(running()) == 0, nil
	})
	left := running()
	if len(left) == 0 {
		return nil
	}
	for _, name := range left {
		_ = syscall.Kill(pids[name], syscall.SIGKILL)
	}
	return fmt.Errorf("components still running after kwokctl delete, killed: %s", strings.Join(left, ", "))
}

// isComponent reports whether pid is a live process started from this
// cluster's directory, so that a pid reused by another process is never
// signalled. Exited processes, zombies included, have an empty cmdline.
func (c *Cluster) isComponent(pid int) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(cmdline), c.dir)
}

// ComponentLogs returns the last lines of each component's log, of the
// provisioner's and of the snapshot-controller's, for failure messages. It
// is empty after Stop.
func (c *Cluster) ComponentLogs(lines int) string {
	files, _ := filepath.Glob(filepath.Join(c.clusterDir(), "logs", "*.log"))
	files = append(files, filepath.Join(c.dir, "provisioner.log"), filepath.Join(c.dir, "snapshot-controller.log"))
	var b strings.Builder
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil || len(data) == 0 {
			continue
		}
		fmt.Fprintf(&b, "==> %s <==\n%s\n", filepath.Base(file), tail(string(data), lines))
	}
	return b.String()
}

// listenLocal listens on 127.0.0.1:port.
func listenLocal(port uint32) (net.Listener, error) {
	var config net.ListenConfig
	return config.Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(port), 10)))
}

// kubectlPath finds the kubectl kwokctl runs to wait for kube-apiserver
// (without one it would download it): ./bin/kubectl, else the one in PATH.
func kubectlPath(root string) (string, error) {
	if path, err := Binary(root, "kubectl"); err == nil {
		return path, nil
	}
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("kwokctl needs kubectl: build ./bin/kubectl or put kubectl in PATH: %w", err)
	}
	return filepath.Abs(path)
}

// kwokctlEnv is kwokctl's environment: no KWOK_* settings from the caller,
// its work directory and home in dir, so ~/.kwok and ~/.kube are never
// touched, and kubectlDir first in PATH, since kwokctl looks there first.
func kwokctlEnv(dir, kubectlDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KWOK_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return append(env,
		"KWOK_WORKDIR="+filepath.Join(dir, "kwok"),
		"HOME="+filepath.Join(dir, "home"),
		"PATH="+kubectlDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
}

// freePorts returns n distinct ports free on 127.0.0.1, chosen at random
// below Linux's ephemeral range (32768 and up) so that neither outgoing
// connections nor a cluster started at the same time by another test
// binary is likely to take them before kwokctl's components listen.
func freePorts(n int) ([]uint32, error) {
	const lowest, highest = 20000, 32000
	var ports []uint32
	var held []func() error
	defer func() {
		for _, release := range held {
			_ = release()
		}
	}()
	for attempt := 0; len(ports) < n && attempt < 100*n; attempt++ {
		port := uint32(lowest + rand.IntN(highest-lowest))
		listener, err := listenLocal(port)
		if err != nil {
			continue
		}
		held = append(held, listener.Close)
		ports = append(ports, port)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("found %d of %d free ports on 127.0.0.1", len(ports), n)
	}
	return ports, nil
}

// FreeAddress returns a free address on 127.0.0.1, chosen as freePorts
// chooses, for a process the caller starts.
func FreeAddress() (string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
