package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// controllerStartTimeout bounds how long a controller process may take to
// answer its readiness probe.
const controllerStartTimeout = time.Minute

// clockTicksPerSecond is Linux's USER_HZ, the unit of /proc/<pid>/stat's
// CPU times; it is 100 on every architecture Go supports on Linux.
const clockTicksPerSecond = 100

// BuildController builds cmd/controller with CGO_ENABLED=0 into dir and
// returns the binary's path. Tests that kill, restart or measure the
// controller run it as its own process, as a cluster would.
func BuildController(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	binary := filepath.Join(dir, "controller")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/controller")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the controller: %w\n%s", err, out)
	}
	return binary, nil
}

// ControllerProcess is one running controller process, its metrics and
// health endpoints on free loopback ports.
type ControllerProcess struct {
	// MetricsURL is the Prometheus endpoint.
	MetricsURL string
	// ReadyURL is the readiness probe.
	ReadyURL string

	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error
}

// StartController runs binary against kubeconfig with args appended to the
// metrics and health flags, and waits until it answers /readyz. Metrics are
// served over plain HTTP (--metrics-secure=false), so MetricsURL and Metrics
// need no token. The kubeconfig is passed as KUBECONFIG, which
// controller-runtime reads when --kubeconfig is not given.
func StartController(ctx context.Context, binary, kubeconfig string, args ...string) (*ControllerProcess, error) {
	return startController(ctx, binary, kubeconfig, nil, false, args)
}

// StartControllerSecureMetrics is StartController with the controller's
// default metrics: HTTPS with a self-signed certificate, answering only
// requests whose bearer token may get /metrics. MetricsURL is https.
func StartControllerSecureMetrics(ctx context.Context, binary, kubeconfig string, args ...string) (*ControllerProcess, error) {
	return startController(ctx, binary, kubeconfig, nil, true, args)
}

// StartControllerLogging is StartController that also copies the process's
// output to log, when not nil (make dev writes it to a file).
func StartControllerLogging(ctx context.Context, binary, kubeconfig string, log io.Writer, args ...string) (*ControllerProcess, error) {
	return startController(ctx, binary, kubeconfig, log, false, args)
}

func startController(ctx context.Context, binary, kubeconfig string, log io.Writer, secure bool, args []string) (*ControllerProcess, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", ports[0])
	health := fmt.Sprintf("127.0.0.1:%d", ports[1])
	scheme := "http"
	if secure {
		scheme = "https"
	}
	p := &ControllerProcess{
		MetricsURL: scheme + "://" + metrics + "/metrics",
		ReadyURL:   "http://" + health + "/readyz",
		log:        &lockedBuffer{},
		done:       make(chan struct{}),
	}
	flags := []string{"--metrics-addr=" + metrics, "--health-addr=" + health, "--metrics-secure=" + strconv.FormatBool(secure)}
	p.cmd = exec.Command(binary, append(flags, args...)...)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out io.Writer = p.log
	if log != nil {
		out = io.MultiWriter(p.log, log)
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the controller: %w", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	if err := p.waitReady(ctx); err != nil {
		return nil, errors.Join(err, p.Kill())
	}
	return p, nil
}

// waitReady polls the readiness probe until it answers 200.
func (p *ControllerProcess) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, controllerStartTimeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if Answers(ctx, p.ReadyURL) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the controller exited before it was ready: %w\n%s", p.err, tail(p.Logs(), logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("the controller was not ready within %s\n%s", controllerStartTimeout, tail(p.Logs(), logTailLines))
		case <-ticker.C:
		}
	}
}

// Answers reports whether url answers 200 OK: a probe of a process the
// tests started.
func Answers(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// PID is the process id.
func (p *ControllerProcess) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *ControllerProcess) Exited() <-chan struct{} { return p.done }

// Logs returns everything the process wrote so far.
func (p *ControllerProcess) Logs() string { return p.log.String() }

// Kill ends the process with SIGKILL, as a crash or an OOM kill would, and
// waits for it.
func (p *ControllerProcess) Kill() error { return p.end(syscall.SIGKILL) }

// Stop asks the process to end with SIGTERM, as a Pod deletion would, and
// waits for it.
func (p *ControllerProcess) Stop() error { return p.end(syscall.SIGTERM) }

func (p *ControllerProcess) end(signal syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(signal); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling the controller: %w", err)
	}
	<-p.done
	return nil
}

// Metrics scrapes the metrics endpoint: every family, or only those named
// (client_golang's name[] filter, which still collects every collector but
// encodes only the families asked for).
func (p *ControllerProcess) Metrics(ctx context.Context, names ...string) (map[string]*dto.MetricFamily, error) {
	target := p.MetricsURL
	if len(names) > 0 {
		target += "?" + url.Values{"name[]": names}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping the controller's metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the controller's metrics: %w", err)
	}
	return families, nil
}

// RSSBytes reads the process's resident set size from /proc.
func (p *ControllerProcess) RSSBytes() (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0, fmt.Errorf("reading the controller's status: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if value, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS %q: %w", value, err)
			}
			return kib * 1024, nil
		}
	}
	return 0, errors.New("no VmRSS in the controller's /proc status")
}

// CPUSeconds reads the user and system CPU time the process has used.
func (p *ControllerProcess) CPUSeconds() (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID()))
	if err != nil {
		return 0, fmt.Errorf("reading the controller's stat: %w", err)
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line (proc(5)).
	_, after, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(after)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat %q", stat)
	}
	var ticks float64
	for _, field := range fields[11:13] {
		value, err := strconv.ParseFloat(field, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing CPU ticks %q: %w", field, err)
		}
		ticks += value
	}
	return ticks / clockTicksPerSecond, nil
}

// lockedBuffer is a bytes.Buffer safe for the process's two output streams
// and a concurrent reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
