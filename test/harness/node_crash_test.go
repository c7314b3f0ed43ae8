//go:build linux

package harness

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

// Environment of TestNodeHelperProcess: the signal's name and the pause
// image archive.
const (
	helperSignalEnv = "EMBEDOPS_NODE_HELPER_SIGNAL"
	helperImageEnv  = "EMBEDOPS_NODE_HELPER_IMAGE"
)

// helperSignals are the signals the helper process sends itself.
var helperSignals = map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL}

// TestNodeTornDownAfterSignalOrCrash ends a test process while its node
// runs a pod: SIGTERM runs the signal path (the node stops, then the
// signal takes its course); SIGKILL leaves everything behind, and the next
// node start sweeps it. Either way nothing of the node is left.
func TestNodeTornDownAfterSignalOrCrash(t *testing.T) {
	if reason := NodeUnsupported(); reason != "" {
		t.Skip(reason)
	}
	archive := buildPause(t)
	for _, signalName := range []string{"SIGTERM", "SIGKILL"} {
		sig := helperSignals[signalName]
		t.Run(signalName, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(lockNodeHost()).To(Succeed())
			before := snapshotHost(t)
			unlockNodeHost()

			name := runNodeHelper(t, signalName, archive)
			g.Expect(lockNodeHost()).To(Succeed())
			defer unlockNodeHost()
			dir := filepath.Join(os.TempDir(), name)
			if sig == syscall.SIGKILL {
				g.Expect(snapshotHost(t).netns).To(ContainElement(name), "a killed process leaves its node behind")
				sweepStaleNodes()
			}
			after := snapshotHost(t)
			g.Expect(after.netns).NotTo(ContainElement(name))
			g.Expect(mountsOf(dir)).To(BeEmpty())
			g.Expect(dir).NotTo(BeAnExistingFile())
			g.Expect(after.sysctls).To(Equal(before.sysctls))
			g.Expect(after.hostPaths).To(Equal(before.hostPaths))
			g.Expect(after.iptables).To(Equal(before.iptables))
			g.Expect(cgroupsNamed(t, name)).To(BeEmpty())
			g.Expect(processesMentioning(dir)).To(BeEmpty())
		})
	}
}

// runNodeHelper runs TestNodeHelperProcess in a child test process that
// starts a node, runs a pod and sends itself sig; it returns the node's
// name once the child has exited.
func runNodeHelper(t *testing.T, signalName, archive string) string {
	t.Helper()
	sig := helperSignals[signalName]
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNodeHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), helperSignalEnv+"="+signalName, helperImageEnv+"="+archive)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var output strings.Builder
	cmd.Stderr = &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name := ""
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		line := scanner.Text()
		output.WriteString(line + "\n")
		if rest, ok := strings.CutPrefix(line, "node "); ok {
			name = rest
		}
	}
	err = cmd.Wait()
	if name == "" {
		t.Fatalf("the helper process started no node (%v):\n%s", err, output.String())
	}
	status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !status.Signaled() || status.Signal() != sig {
		t.Fatalf("the helper process ended with %v, not by %s:\n%s", err, sig, output.String())
	}
	return name
}

// TestNodeHelperProcess is TestNodeTornDownAfterSignalOrCrash's child: it
// starts a node, runs a pod, prints the node's name and sends itself the
// signal it is given.
func TestNodeHelperProcess(t *testing.T) {
	sig, ok := helperSignals[os.Getenv(helperSignalEnv)]
	if !ok {
		t.Skip("runs only as TestNodeTornDownAfterSignalOrCrash's child process")
	}
	g := NewWithT(t)
	node, err := StartNode(t.Context(), NodeOptions{SandboxImage: PauseImage.Ref, Images: []string{os.Getenv(helperImageEnv)}})
	g.Expect(err).NotTo(HaveOccurred())
	runPauseToReady(t.Context(), g, node)
	_, err = os.Stdout.WriteString("node " + node.Name + "\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(syscall.Kill(os.Getpid(), sig)).To(Succeed())
	select {} // the signal ends the process
}
