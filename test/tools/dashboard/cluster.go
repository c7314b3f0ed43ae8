package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/tsdb"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/vgimg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// Names of what the recording creates.
const (
	// demoNamespace holds the servers.
	demoNamespace = "embedops-demo"
	// teiServer is the server the TEI stand-in's series are labelled with,
	// as the PodMonitor in config/prometheus labels a pod's.
	teiServer = "minimal"
	// teiModel is the model the hub and TEI stand-ins serve.
	teiModel = "org/embed"
)

// recording is the cluster, the processes and the TSDB of one run.
type recording struct {
	cluster    *harness.Cluster
	controller *harness.ControllerProcess
	processes  []*harness.Process
	db         *tsdb.DB
	targets    []target
	teiURL     string
	samples    int
}

// startRecording starts the cluster, the controller, the stand-ins and the
// TSDB in work.
func startRecording(ctx context.Context, work string) (r *recording, err error) {
	r = &recording{}
	defer func() {
		if err != nil {
			r.stop()
		}
	}()
	fmt.Fprintln(os.Stderr, "dashboard: starting the local cluster and the controller")
	if r.cluster, err = harness.StartCluster(ctx, harness.ClusterOptions{Nodes: 2}); err != nil {
		return r, err
	}
	if err := operator.InstallCRDs(r.cluster.Config); err != nil {
		return r, err
	}
	binary, err := harness.BuildController(work)
	if err != nil {
		return r, err
	}
	// The populator image is never pulled: kwok completes populate Jobs
	// with a simulated result (test/harness kwok_stages.go).
	if r.controller, err = harness.StartController(ctx, binary, r.cluster.Kubeconfig,
		"--endpoint-check=off", "--populator-image=embedops:dashboard", "--progress-interval=5s"); err != nil {
		return r, err
	}
	if err := r.startStandins(ctx, work); err != nil {
		return r, err
	}
	if r.db, err = tsdb.Open(filepath.Join(work, "tsdb"), promslog.NewNopLogger(), nil, tsdb.DefaultOptions(), nil); err != nil {
		return r, fmt.Errorf("opening the TSDB: %w", err)
	}
	r.targets = append(r.targets, target{url: r.controller.MetricsURL})
	return r, nil
}

// startStandins builds and runs the hub and TEI stand-ins on loopback.
func (r *recording) startStandins(ctx context.Context, work string) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	for _, name := range []string{"hub", "tei"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(work, name), "./test/standin/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the %s stand-in: %w\n%s", name, err, out)
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	hubURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	hub, err := harness.StartProcess(ctx, harness.ProcessOptions{
		Name: "hub", Binary: filepath.Join(work, "hub"), LogPath: filepath.Join(work, "hub.log"),
		Args:     []string{"-addr=127.0.0.1:" + strconv.Itoa(ports[0]), "-model=" + teiModel},
		ReadyURL: hubURL + "/api/models/" + teiModel,
	})
	if err != nil {
		return err
	}
	r.processes = append(r.processes, hub)
	// TEI reads HF_ENDPOINT from its environment only.
	if err := os.Setenv("HF_ENDPOINT", hubURL); err != nil {
		return err
	}
	r.teiURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	tei, err := harness.StartProcess(ctx, harness.ProcessOptions{
		Name: "tei", Binary: filepath.Join(work, "tei"), LogPath: filepath.Join(work, "tei.log"),
		Args: []string{"--model-id=" + teiModel, "--hostname=127.0.0.1", "--port=" + strconv.Itoa(ports[1]),
			"--prometheus-port=" + strconv.Itoa(ports[2]), "--huggingface-hub-cache=" + filepath.Join(work, "cache")},
		ReadyURL: r.teiURL + "/health",
	})
	if err != nil {
		return err
	}
	r.processes = append(r.processes, tei)
	r.targets = append(r.targets, target{
		url:    "http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/metrics",
		labels: map[string]string{"namespace": demoNamespace, "embeddingserver": teiServer},
	})
	return nil
}

// servers are the EmbeddingServers of the recording: ready ones, one whose
// pods cannot pull their image, and "retired", deleted halfway so that its
// binding retires at once.
func servers() []*embedopsv1.EmbeddingServer {
	pullFails := map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		harness.SimulateAnnotation: harness.SimulateImagePullBackOff,
	}}}
	return []*embedopsv1.EmbeddingServer{
		fixtures.EmbeddingServer(demoNamespace, teiServer),
		fixtures.EmbeddingServer(demoNamespace, "shared", fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithReplicas(2)),
		fixtures.EmbeddingServer(demoNamespace, "large", fixtures.WithModel("BAAI/bge-large-en-v1.5", "main"), fixtures.WithReplicas(3)),
		fixtures.EmbeddingServer(demoNamespace, "pull-fails", fixtures.WithPodTemplate(pullFails)),
		fixtures.EmbeddingServer(demoNamespace, "retired", fixtures.WithRetainFor(0)),
	}
}

// record creates the servers, sends embedding requests and scrapes every
// interval for duration, deleting "retired" halfway.
func (r *recording) record(ctx context.Context, duration, interval time.Duration) (time.Time, time.Time, error) {
	c := r.cluster.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("creating the namespace: %w", err)
	}
	start := time.Now()
	if err := r.scrapeAll(ctx, start); err != nil {
		return start, start, err
	}
	for _, server := range servers() {
		if err := c.Create(ctx, server); err != nil {
			return start, start, fmt.Errorf("creating %s: %w", server.Name, err)
		}
	}
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go r.sendRequests(load)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	deleted := false
	for now := start; now.Sub(start) < duration; {
		select {
		case <-ctx.Done():
			return start, now, ctx.Err()
		case now = <-ticker.C:
		}
		if !deleted && now.Sub(start) > duration/2 {
			retired := fixtures.EmbeddingServer(demoNamespace, "retired")
			if err := c.Delete(ctx, retired); err != nil {
				return start, now, fmt.Errorf("deleting %s: %w", retired.Name, err)
			}
			deleted = true
		}
		if err := r.scrapeAll(ctx, now); err != nil {
			return start, now, err
		}
	}
	return start, time.Now(), nil
}

// scrapeAll scrapes every target at now and commits the samples.
func (r *recording) scrapeAll(ctx context.Context, now time.Time) error {
	app := r.db.Appender(ctx)
	for i := range r.targets {
		added, err := scrape(ctx, app, &r.targets[i], now)
		if err != nil {
			return errors.Join(err, app.Rollback())
		}
		r.samples += added
	}
	return app.Commit()
}

// sendRequests posts embedding requests to the TEI stand-in until ctx
// ends: batches of 1 to 8 inputs, and now and then an empty one, which TEI
// refuses as a validation error.
func (r *recording) sendRequests(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		inputs := make([]string, 1+i%8)
		for j := range inputs {
			inputs[j] = fmt.Sprintf("request %d input %d", i, j)
		}
		if i%17 == 0 {
			inputs = []string{}
		}
		body, _ := json.Marshal(map[string]any{"inputs": inputs})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.teiURL+"/embed", bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(50+(i%5)*40) * time.Millisecond):
		}
	}
}

// draw evaluates every panel over [start, end] and lays them out.
func (r *recording) draw(ctx context.Context, d *Dashboard, start, end time.Time, interval time.Duration) (*vgimg.PngCanvas, error) {
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	// Grafana's $__rate_interval is at least four scrape intervals.
	rateInterval := 4 * interval
	plots := map[int]*plot.Plot{}
	for i, panel := range d.Panels {
		if panel.Type == "row" {
			continue
		}
		lines, err := evaluate(ctx, engine, r.db, panel, start, end, interval, rateInterval)
		if err != nil {
			return nil, err
		}
		if plots[i], err = panelPlot(panel, lines); err != nil {
			return nil, err
		}
	}
	return drawDashboard(d, plots)
}

// stop ends what startRecording started.
func (r *recording) stop() {
	for _, p := range r.processes {
		if err := p.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "dashboard:", err)
		}
	}
	if r.db != nil {
		_ = r.db.Close()
	}
	if r.controller != nil {
		if err := r.controller.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "dashboard: stopping the controller:", err)
		}
	}
	if r.cluster != nil {
		if err := r.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "dashboard: stopping the cluster:", err)
		}
	}
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
