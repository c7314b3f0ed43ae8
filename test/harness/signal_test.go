package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

// signalChildEnv makes the test binary play a TestMain that StopOnSignal
// watches (TestStopOnSignalChild).
const signalChildEnv = "EMBEDOPS_HARNESS_SIGNAL_CHILD"

func TestStopOnSignalStopsWhatTestMainStartedBeforeExiting(t *testing.T) {
	g := NewWithT(t)
	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestStopOnSignalChild$")
	child.Env = append(os.Environ(), signalChildEnv+"=1")
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(child.Start()).To(Succeed())
	lines := bufio.NewScanner(out)
	g.Expect(lines.Scan()).To(BeTrue())
	g.Expect(lines.Text()).To(Equal("watching"))
	g.Expect(child.Process.Signal(syscall.SIGTERM)).To(Succeed())
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	err = child.Wait()
	var exit *exec.ExitError
	g.Expect(errors.As(err, &exit)).To(BeTrue(), "the child exits with a status: %v", err)
	g.Expect(exit.ExitCode()).To(Equal(1))
	g.Expect(strings.Join(rest, "\n")).To(ContainSubstring("stopped"))
}

// TestStopOnSignalChild is the child of the test above; it does nothing
// when run on its own.
func TestStopOnSignalChild(t *testing.T) {
	if os.Getenv(signalChildEnv) == "" {
		t.Skip("run by TestStopOnSignalStopsWhatTestMainStartedBeforeExiting")
	}
	StopOnSignal("the child", func() error {
		fmt.Println("stopped")
		return nil
	})
	fmt.Println("watching")
	select {} // until the signal ends the process, or the parent's context kills it
}
