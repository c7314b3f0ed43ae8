package gitops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/embedops/embedops/test/harness"
)

// Flux process timings.
const (
	// fluxStartTimeout bounds how long a Flux controller may take to answer
	// its readiness probe on 2 busy cores.
	fluxStartTimeout = 2 * time.Minute
	// fluxStopTimeout bounds a graceful stop, after which the process is
	// killed.
	fluxStopTimeout = 30 * time.Second
	// logTailLines is how much of a Flux controller's log a failure shows.
	logTailLines = 40
)

// fluxController is a Flux controller from ./bin running as a child process
// against the local cluster, its log in a file.
type fluxController struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// startFlux runs source-controller, its artifacts in dir and served on a
// free loopback port, and kustomize-controller.
func startFlux(ctx context.Context, kubeconfig, dir string) ([]*fluxController, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	storage := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(storage, 0o750); err != nil {
		return nil, fmt.Errorf("creating the artifact storage: %w", err)
	}
	storageAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	source, err := startFluxController(ctx, "source-controller", kubeconfig, dir, ports[1:3],
		"--storage-path="+storage, "--storage-addr="+storageAddr, "--storage-adv-addr="+storageAddr)
	if err != nil {
		return nil, err
	}
	kustomize, err := startFluxController(ctx, "kustomize-controller", kubeconfig, dir, ports[3:5])
	if err != nil {
		return nil, errors.Join(err, source.stop())
	}
	return []*fluxController{source, kustomize}, nil
}

// startFluxController runs bin/<name> with leader election off, watching
// every namespace, metrics and health probes on the two loopback ports, and
// args; it waits until the readiness probe answers. Flux controllers read
// the kubeconfig from $KUBECONFIG: they have no --kubeconfig flag.
func startFluxController(ctx context.Context, name, kubeconfig, dir string, ports []int, args ...string) (*fluxController, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	binary, err := harness.Binary(root, name)
	if err != nil {
		return nil, err
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[1])
	flags := append([]string{
		"--enable-leader-election=false",
		"--watch-all-namespaces=true",
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", ports[0]),
		"--health-addr=" + health,
		"--log-encoding=console",
	}, args...)
	c := &fluxController{name: name, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	if err := c.start(binary, kubeconfig, flags); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, "http://"+health+"/readyz"); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	return c, nil
}

// start starts the process with its output in the log file.
func (c *fluxController) start(binary, kubeconfig string, flags []string) error {
	log, err := os.Create(c.logPath)
	if err != nil {
		return fmt.Errorf("creating the %s log: %w", c.name, err)
	}
	defer func() { _ = log.Close() }()
	c.cmd = exec.Command(binary, flags...)
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	dieWithTestBinary(c.cmd)
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	return nil
}

// waitReady polls the readiness probe until it answers 200 OK, failing as
// soon as the process exits.
func (c *fluxController) waitReady(ctx context.Context, url string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, fluxStartTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-c.done:
			return false, errors.Join(fmt.Errorf("%s exited before it was ready", c.name), c.err)
		default:
		}
		return harness.Answers(ctx, url), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be ready: %w\n%s", c.name, err, c.logTail())
	}
	return nil
}

// stop asks the process to end with SIGTERM and waits for it, killing it
// when it takes longer than fluxStopTimeout.
func (c *fluxController) stop() error {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", c.name, err)
	}
	timer := time.NewTimer(fluxStopTimeout)
	defer timer.Stop()
	select {
	case <-c.done:
		return nil
	case <-timer.C:
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", c.name, err)
	}
	<-c.done
	return fmt.Errorf("%s did not stop within %s and was killed", c.name, fluxStopTimeout)
}

// logTail is the end of the process's log, headed by its name.
func (c *fluxController) logTail() string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("--- %s log: %v", c.name, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return fmt.Sprintf("--- last %d lines of the %s log:\n%s", len(lines), c.name, strings.Join(lines, "\n"))
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, holding each
// open until all are found.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, listener)
		ports = append(ports, listener.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
