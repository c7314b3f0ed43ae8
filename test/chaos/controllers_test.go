package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/embedops/embedops/test/harness"
)

// controllerArgs are every controller process's flags: short requeues, and
// no endpoint check, since the controller runs outside the cluster.
var controllerArgs = []string{"--progress-interval=2s", "--endpoint-check=off"}

// logTail is how many lines of the controllers' logs a failure shows; the
// whole logs go to a file.
const logTail = 60

// processes runs one test's controller processes and keeps the logs of
// every one of them for failure reports.
type processes struct {
	t       *testing.T
	args    []string
	mu      sync.Mutex
	running []*harness.ControllerProcess
	ended   strings.Builder
	started int
}

// newProcesses returns a set of controllers run with args after
// controllerArgs; they are stopped when the test ends.
func newProcesses(t *testing.T, args ...string) *processes {
	p := &processes{t: t, args: append(append([]string{}, controllerArgs...), args...)}
	t.Cleanup(p.cleanup)
	return p
}

// start starts one more controller and waits until it is ready.
func (p *processes) start(ctx context.Context) *harness.ControllerProcess {
	p.t.Helper()
	proc, err := harness.StartController(ctx, controller, cluster.Kubeconfig, p.args...)
	if err != nil {
		p.t.Fatalf("starting controller #%d: %v", p.started+1, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started++
	p.running = append(p.running, proc)
	return proc
}

// kill ends proc with SIGKILL and keeps its log. A process that already
// ended by itself is noted: a lost lease or a crash.
func (p *processes) kill(proc *harness.ControllerProcess) {
	p.t.Helper()
	select {
	case <-proc.Exited():
		p.t.Logf("controller pid %d exited by itself before its kill:\n%s", proc.PID(), tailLines(proc.Logs(), logTail))
	default:
	}
	if err := proc.Kill(); err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retire(proc, "killed")
}

// retire moves proc's log to the ended logs.
func (p *processes) retire(proc *harness.ControllerProcess, how string) {
	for i, running := range p.running {
		if running == proc {
			p.running = append(p.running[:i], p.running[i+1:]...)
		}
	}
	fmt.Fprintf(&p.ended, "===== controller pid %d (%s) =====\n%s", proc.PID(), how, proc.Logs())
}

// runningProcesses returns the controllers not killed or stopped.
func (p *processes) runningProcesses() []*harness.ControllerProcess {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*harness.ControllerProcess{}, p.running...)
}

// logs returns every controller's log so far.
func (p *processes) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	b.WriteString(p.ended.String())
	for _, proc := range p.running {
		fmt.Fprintf(&b, "===== controller pid %d (running) =====\n%s", proc.PID(), proc.Logs())
	}
	return b.String()
}

// cleanup stops the running controllers and, when the test failed, saves
// every log to a file and shows its end.
func (p *processes) cleanup() {
	for _, proc := range p.runningProcesses() {
		_ = proc.Stop()
		p.mu.Lock()
		p.retire(proc, "stopped")
		p.mu.Unlock()
	}
	if !p.t.Failed() {
		return
	}
	logs := p.logs()
	file, err := os.CreateTemp("", "embedops-chaos-controllers-*.log")
	if err == nil {
		_, _ = file.WriteString(logs)
		_ = file.Close()
		p.t.Logf("controller logs: %s", file.Name())
	}
	p.t.Logf("end of the controller logs:\n%s", tailLines(logs, logTail))
}

// isLeader reports whether proc holds the leader lease, from its
// leader_election_master_status metric.
func isLeader(ctx context.Context, proc *harness.ControllerProcess) bool {
	families, err := proc.Metrics(ctx)
	if err != nil {
		return false
	}
	family, ok := families["leader_election_master_status"]
	if !ok {
		return false
	}
	for _, metric := range family.GetMetric() {
		if metric.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// tailLines returns the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
