//go:build linux

package harness

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// envtestHelperEnv makes TestEnvtestHelperProcess run.
const envtestHelperEnv = "EMBEDOPS_ENVTEST_HELPER"

// A test binary killed while its envtest control plane runs (SIGKILL: no
// deferred teardown, as after a panic or go test's -timeout) leaves no
// etcd or kube-apiserver behind.
func TestEnvtestDiesWithItsTestBinary(t *testing.T) {
	if setprivPath() == "" {
		const missing = "util-linux's setpriv is not installed: envtest's processes cannot die with the test binary"
		if os.Getenv("CI") != "" {
			t.Fatal(missing + "; CI runs every test")
		}
		t.Skip(missing)
	}
	g := NewWithT(t)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestEnvtestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envtestHelperEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	var output strings.Builder
	cmd.Stderr = &output
	g.Expect(cmd.Start()).To(Succeed())
	var children []int
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		output.WriteString(scanner.Text() + "\n")
		if rest, ok := strings.CutPrefix(scanner.Text(), "child "); ok {
			pid, err := strconv.Atoi(rest)
			g.Expect(err).NotTo(HaveOccurred())
			children = append(children, pid)
		}
		if dir, ok := strings.CutPrefix(scanner.Text(), "dir "); ok {
			// The killed helper cannot remove envtest's directories.
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
		}
	}
	err = cmd.Wait()
	status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	g.Expect(ok && status.Signaled() && status.Signal() == syscall.SIGKILL).To(BeTrue(),
		"the helper ended with %v, not killed:\n%s", err, output.String())
	g.Expect(children).To(HaveLen(2), "etcd and kube-apiserver:\n%s", output.String())
	for _, pid := range children {
		g.Eventually(func() bool { return running(pid) }).WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).
			Should(BeFalse(), "process %d outlived the test binary that started it", pid)
	}
}

// TestEnvtestHelperProcess is TestEnvtestDiesWithItsTestBinary's child: it
// starts a control plane, prints its processes and directories and kills
// itself.
func TestEnvtestHelperProcess(t *testing.T) {
	if os.Getenv(envtestHelperEnv) == "" {
		t.Skip("runs only as TestEnvtestDiesWithItsTestBinary's child process")
	}
	g := NewWithT(t)
	env, err := StartEnv(EnvOptions{CRDPaths: []string{t.TempDir()}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, pid := range childrenOf(os.Getpid()) {
		fmt.Printf("child %d\n", pid)
	}
	fmt.Printf("dir %s\ndir %s\n", env.environment.ControlPlane.Etcd.DataDir, env.environment.ControlPlane.APIServer.CertDir)
	g.Expect(syscall.Kill(os.Getpid(), syscall.SIGKILL)).To(Succeed())
	select {} // the signal ends the process
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, _, ok := processState(child); ok && parent == pid {
			children = append(children, child)
		}
	}
	return children
}

// running reports whether pid exists and is not a zombie waiting for
// whoever adopted it to reap it.
func running(pid int) bool {
	_, state, ok := processState(pid)
	return ok && state != "Z"
}

// processState reads a process's parent and state from /proc/<pid>/stat.
func processState(pid int) (parent int, state string, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	// The command, in parentheses, may hold spaces: the fields follow its
	// last closing parenthesis.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 2 {
		return 0, "", false
	}
	parent, err = strconv.Atoi(fields[1])
	return parent, fields[0], err == nil
}
