package harness

import (
	"bufio"
	"context"
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
	rest, err := signalChild(t, g, "stop", "watching", syscall.SIGTERM)
	var exit *exec.ExitError
	g.Expect(errors.As(err, &exit)).To(BeTrue(), "the child exits with a status: %v", err)
	g.Expect(exit.ExitCode()).To(Equal(1))
	g.Expect(rest).To(ContainSubstring("stopped"))
}

// A signal while something starts cancels the start, which tears down what
// it started; the process goes on to report it instead of dying halfway.
func TestASignalWhileStartingCancelsTheStart(t *testing.T) {
	g := NewWithT(t)
	rest, err := signalChild(t, g, "start", "starting", syscall.SIGINT)
	g.Expect(err).NotTo(HaveOccurred(), "the signal did not kill the child: %s", rest)
	g.Expect(rest).To(And(ContainSubstring("torn down"), ContainSubstring("stopped by a signal while starting")))
}

// signalChild runs TestStopOnSignalChild in the given mode, sends it sig
// once it printed ready, and returns what it printed after and how it
// exited.
func signalChild(t *testing.T, g *WithT, mode, ready string, sig os.Signal) (string, error) {
	t.Helper()
	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestStopOnSignalChild$")
	child.Env = append(os.Environ(), signalChildEnv+"="+mode)
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(child.Start()).To(Succeed())
	lines := bufio.NewScanner(out)
	g.Expect(lines.Scan()).To(BeTrue())
	g.Expect(lines.Text()).To(Equal(ready))
	g.Expect(child.Process.Signal(sig)).To(Succeed())
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	return strings.Join(rest, "\n"), child.Wait()
}

// TestStopOnSignalChild is the child of the tests above (the value of
// signalChildEnv says which); it does nothing when run on its own.
func TestStopOnSignalChild(t *testing.T) {
	switch os.Getenv(signalChildEnv) {
	case "":
		t.Skip("run by TestStopOnSignalStopsWhatTestMainStartedBeforeExiting and TestASignalWhileStartingCancelsTheStart")
	case "start":
		_, err := StartUnlessSignalled(context.Background(), func(ctx context.Context) (struct{}, error) {
			fmt.Println("starting")
			<-ctx.Done()
			fmt.Println("torn down")
			return struct{}{}, ctx.Err()
		})
		fmt.Println(err)
		return
	}
	StopOnSignal("the child", func() error {
		fmt.Println("stopped")
		return nil
	})
	fmt.Println("watching")
	select {} // until the signal ends the process, or the parent's context kills it
}
