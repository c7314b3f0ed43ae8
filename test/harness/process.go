package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Child process timings.
const (
	// processStartTimeout bounds how long a process may take to answer its
	// readiness probe on 2 busy cores.
	processStartTimeout = 2 * time.Minute
	// processStopTimeout bounds a graceful stop, after which the process is
	// killed.
	processStopTimeout = 30 * time.Second
	// processLogTailLines is how much of a process's log a failure shows.
	processLogTailLines = 40
)

// ProcessOptions describe a program from ./bin to run against the local
// cluster.
type ProcessOptions struct {
	// Name names the process in messages.
	Name string
	// Binary is the program's path.
	Binary string
	// Args are its arguments.
	Args []string
	// Kubeconfig is passed as $KUBECONFIG.
	Kubeconfig string
	// Env are more variables (NAME=value) for its environment.
	Env []string
	// LogPath is the file that receives its standard output and error.
	LogPath string
	// ReadyURL is a probe that answers 200 OK once the process is ready.
	ReadyURL string
	// Ready, when set, replaces ReadyURL: it reports whether the process
	// is ready (the real node probes through its network namespace).
	Ready func(context.Context) bool
	// Spawn, when set, starts the command instead of cmd.Start (the real
	// node starts its processes inside its network namespace).
	Spawn func(*exec.Cmd) error
}

// Process is a program running as a child process, its log in a file. The
// kernel kills it when the process that started it dies.
type Process struct {
	// Name names the process in messages.
	Name string
	// LogPath is the file holding its output.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts the program and waits until its readiness probe
// answers, failing as soon as it exits.
func StartProcess(ctx context.Context, opts ProcessOptions) (*Process, error) {
	p := &Process{Name: opts.Name, LogPath: opts.LogPath, done: make(chan struct{})}
	if err := p.start(opts); err != nil {
		return nil, err
	}
	ready := opts.Ready
	if ready == nil {
		ready = func(ctx context.Context) bool { return Answers(ctx, opts.ReadyURL) }
	}
	if err := p.waitReady(ctx, ready); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// start starts the process with its output in the log file.
func (p *Process) start(opts ProcessOptions) error {
	log, err := os.Create(opts.LogPath)
	if err != nil {
		return fmt.Errorf("creating the %s log: %w", p.Name, err)
	}
	defer func() { _ = log.Close() }()
	p.cmd = exec.Command(opts.Binary, opts.Args...)
	p.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+opts.Kubeconfig), opts.Env...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	dieWithParent(p.cmd)
	spawn := opts.Spawn
	if spawn == nil {
		spawn = (*exec.Cmd).Start
	}
	if err := spawn(p.cmd); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return nil
}

// waitReady polls the readiness probe until it reports ready, failing as
// soon as the process exits.
func (p *Process) waitReady(ctx context.Context, ready func(context.Context) bool) error {
	err := wait.PollUntilContextTimeout(ctx, pollInterval, processStartTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, errors.Join(fmt.Errorf("%s exited before it was ready", p.Name), p.err)
		default:
		}
		return ready(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be ready: %w\n%s", p.Name, err, p.LogTail())
	}
	return nil
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Stop asks the process to end with SIGTERM and waits for it, killing it
// when it takes longer than processStopTimeout. Stopping an exited process
// does nothing.
func (p *Process) Stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", p.Name, err)
	}
	timer := time.NewTimer(processStopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.Name, err)
	}
	<-p.done
	return fmt.Errorf("%s did not stop within %s and was killed", p.Name, processStopTimeout)
}

// LogTail is the end of the process's log, headed by its name.
func (p *Process) LogTail() string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("--- %s log: %v", p.Name, err)
	}
	return fmt.Sprintf("--- last lines of the %s log (%s):\n%s", p.Name, p.LogPath, tail(string(data), processLogTailLines))
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }
