package main

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/tei"
)

// BackendsVariable names the variable of the stand-in's image that says
// which TEI backends it plays, comma-separated, in the order TEI's
// init_backend tries them.
const BackendsVariable = "EMBEDOPS_STANDIN_BACKENDS"

// BatchComputeVariable names the variable of the stand-in that makes each
// batch compute for at least that long on the backend thread (a Go
// duration such as "1s"; unset, a batch is embedded once), so that a test
// can saturate the stand-in as a loaded TEI is saturated. TEI reads no such
// setting: its batches take what the model takes.
const BatchComputeVariable = "EMBEDOPS_STANDIN_BATCH_COMPUTE"

// BackendDiesAtVariable names the variable of the stand-in that kills its
// backend at that /embed batch (a positive integer; unset, never): the
// batch fails, and from then on every batch fails with 424 and /health
// answers 503 at once while the port stays open, as a TEI whose backend
// hit a CUDA error does (v1.9.3 backends/src/lib.rs, Backend::health;
// router/src/http/server.rs, ErrorType). A restarted container starts
// with a live backend again. TEI reads no such setting.
const BackendDiesAtVariable = "EMBEDOPS_STANDIN_BACKEND_DIES_AT_BATCH"

// defaultBackends are those of the cpu images (Dockerfile: `--features
// ort,candle`), ORT first (backends/src/lib.rs, init_backend).
var defaultBackends = []string{backendORT, backendCandle}

// Backends the stand-in plays.
const (
	backendORT    = "ort"
	backendCandle = "candle"
)

// defaultRevision is the revision the router downloads when none is given
// (router/src/lib.rs: `revision.clone().unwrap_or("main".to_string())`).
const defaultRevision = "main"

// config is how the router was started: its parsed arguments with TEI's
// defaults and the environment its hub client reads.
type config struct {
	args    tei.Parsed
	modelID string
	// revision is --revision as given, "" when absent: /info reports it.
	revision string
	cacheDir string
	endpoint string
	token    string
	apiKey   string
	pooling  string
	// host is the address to listen on; hostWarning says why it is not
	// --hostname, if it is not.
	host, hostWarning string
	port, promPort    int
	jsonOutput        bool
	maxClientBatch    int
	backends          []string
	// batchCompute is how long each batch computes at least.
	batchCompute time.Duration
	// backendDiesAt is the batch at which the backend dies, 0 for never.
	backendDiesAt int
}

// configOf reads the parsed arguments and the environment.
func configOf(p tei.Parsed, env map[string]string) (config, error) {
	revision, _ := p.Lookup("revision")
	apiKey, _ := p.Lookup("api_key")
	pooling, _ := p.Lookup("pooling")
	c := config{
		args:       p,
		modelID:    p.Value("model_id"),
		revision:   revision,
		cacheDir:   cacheDir(p, env),
		endpoint:   hubEndpoint(env),
		token:      p.HubToken(),
		apiKey:     apiKey,
		pooling:    pooling,
		jsonOutput: p.Value("json_output") == "true",
	}
	c.host, c.hostWarning = listenHost(p.Value("hostname"))
	var err error
	if c.port, err = strconv.Atoi(p.Value("port")); err != nil {
		return config{}, fmt.Errorf("port: %w", err)
	}
	if c.promPort, err = strconv.Atoi(p.Value("prometheus_port")); err != nil {
		return config{}, fmt.Errorf("prometheus port: %w", err)
	}
	if c.maxClientBatch, err = strconv.Atoi(p.Value("max_client_batch_size")); err != nil {
		return config{}, fmt.Errorf("max client batch size: %w", err)
	}
	if c.backends, err = backendsOf(env[BackendsVariable]); err != nil {
		return config{}, err
	}
	if c.batchCompute, err = batchComputeOf(env[BatchComputeVariable]); err != nil {
		return config{}, err
	}
	c.backendDiesAt, err = backendDiesAtOf(env[BackendDiesAtVariable])
	return c, err
}

// downloadRevision is the revision fetched: the one given, else "main".
func (c config) downloadRevision() string {
	if c.revision == "" {
		return defaultRevision
	}
	return c.revision
}

// addr is the http server's address (router/src/main.rs: SocketAddr of
// the parsed hostname and --port).
func (c config) addr() string { return net.JoinHostPort(c.host, strconv.Itoa(c.port)) }

// promAddr is the Prometheus listener's: the same host on
// --prometheus-port (router/src/prometheus.rs, `addr.set_port(port)`).
func (c config) promAddr() string { return net.JoinHostPort(c.host, strconv.Itoa(c.promPort)) }

// listenHost parses --hostname as an IP address; anything else, such as the
// pod name the runtime puts in HOSTNAME, falls back to 0.0.0.0 with a
// warning (router/src/main.rs: "Invalid hostname, defaulting to 0.0.0.0").
func listenHost(hostname string) (string, string) {
	if net.ParseIP(hostname) != nil {
		return hostname, ""
	}
	return "0.0.0.0", "Invalid hostname, defaulting to 0.0.0.0"
}

// cacheDir is --huggingface-hub-cache, else hf-hub's default: $HF_HOME/hub,
// HF_HOME defaulting to ~/.cache/huggingface (hf-hub src/lib.rs,
// Cache::from_env).
func cacheDir(p tei.Parsed, env map[string]string) string {
	if dir, ok := p.Lookup("huggingface_hub_cache"); ok {
		return dir
	}
	home := env["HF_HOME"]
	if home == "" {
		home = filepath.Join(env["HOME"], ".cache", "huggingface")
	}
	return filepath.Join(home, "hub")
}

// hubEndpoint is HF_ENDPOINT, else the public hub (hf-hub src/api/mod.rs,
// ApiBuilder::from_env), without a trailing slash.
func hubEndpoint(env map[string]string) string {
	if endpoint := env["HF_ENDPOINT"]; endpoint != "" {
		return strings.TrimRight(endpoint, "/")
	}
	return populate.DefaultEndpoint
}

// backendsOf parses the backends variable; empty is the cpu images' set.
func backendsOf(value string) ([]string, error) {
	if value == "" {
		return defaultBackends, nil
	}
	var backends []string
	for _, b := range strings.Split(value, ",") {
		if b != backendORT && b != backendCandle {
			return nil, fmt.Errorf("%s: unknown backend %q, want %s or %s", BackendsVariable, b, backendORT, backendCandle)
		}
		backends = append(backends, b)
	}
	return backends, nil
}

// batchComputeOf parses the batch compute variable; empty is none.
func batchComputeOf(value string) (time.Duration, error) {
	if value == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(value)
	if err == nil && d < 0 {
		err = errors.New("negative")
	}
	if err != nil {
		return 0, fmt.Errorf("%s: want a duration such as 1s: %w", BatchComputeVariable, err)
	}
	return d, nil
}

// backendDiesAtOf parses the backend death variable; empty is never.
func backendDiesAtOf(value string) (int, error) {
	if value == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(value)
	if err == nil && n < 1 {
		err = errors.New("not positive")
	}
	if err != nil {
		return 0, fmt.Errorf("%s: want a batch number such as 1: %w", BackendDiesAtVariable, err)
	}
	return n, nil
}
