package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/embedops/embedops/internal/tei"
)

// usageTail is what clap prints after a usage error.
const usageTail = "\n\nUsage: text-embeddings-router [OPTIONS] --model-id <MODEL_ID>\n\nFor more information, try '--help'."

// hubTimeout bounds each request to the hub, so a hub that does not answer
// fails the start instead of hanging it.
const hubTimeout = 5 * time.Minute

// listening is told the addresses the servers listen on, once they do.
type listening func(http, prometheus net.Addr)

// run is the router: parse the command line, load the model, serve until
// ctx ends. Logs go to stdout (tracing_subscriber's default), clap's
// errors to stderr. It returns the exit status: 2 for a refused command
// line (clap), 1 for a model it cannot load or an address it cannot listen
// on.
func run(ctx context.Context, argv []string, env map[string]string, stdout, stderr io.Writer, ready listening) int {
	if helpOrVersion(argv, stdout) {
		return 0
	}
	parsed, err := tei.Parse(argv, env)
	if usage := (*tei.UsageError)(nil); errors.As(err, &usage) {
		fmt.Fprintln(stderr, usage.Error()+usageTail)
		return tei.UsageExitCode
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return tei.UsageExitCode
	}
	c, err := configOf(parsed, env)
	if err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	log := newLogger(stdout, c.jsonOutput)
	if err := serve(ctx, c, log, ready); err != nil {
		// main returns the error: Rust prints it to stderr and exits 1.
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	return 0
}

// serve loads the model, then serves the http and Prometheus listeners
// until ctx ends: TEI listens only once its backend started.
func serve(ctx context.Context, c config, log *slog.Logger, ready listening) error {
	log.Info("Starting", "model_id", c.modelID, "revision", c.revision, "backends", strings.Join(c.backends, ","))
	if c.hostWarning != "" {
		log.Warn(c.hostWarning)
	}
	client := &hubClient{endpoint: c.endpoint, token: c.token, client: &http.Client{Timeout: hubTimeout}}
	m, err := load(ctx, c, filesOf(c, client, log), log)
	if err != nil {
		return err
	}
	mt := newMetrics()
	api, err := net.Listen("tcp", c.addr())
	if err != nil {
		return fmt.Errorf("could not listen on %s: %w", c.addr(), err)
	}
	prom, err := net.Listen("tcp", c.promAddr())
	if err != nil {
		_ = api.Close()
		return fmt.Errorf("could not listen for metrics on %s: %w", c.promAddr(), err)
	}
	servers := []*http.Server{
		{Handler: router(c, m, mt, log, startBackendThread(c.backendDiesAt)), ReadHeaderTimeout: time.Minute},
		{Handler: mt.handler(), ReadHeaderTimeout: time.Minute},
	}
	return serveUntilDone(ctx, servers, []net.Listener{api, prom}, log, ready)
}

// serveUntilDone serves each server on its listener until ctx ends or one
// fails, then shuts them all down.
func serveUntilDone(ctx context.Context, servers []*http.Server, listeners []net.Listener, log *slog.Logger, ready listening) error {
	failed := make(chan error, len(servers))
	for i, s := range servers {
		go func() { failed <- s.Serve(listeners[i]) }()
	}
	log.Info("Ready", "addr", listeners[0].Addr().String(), "prometheus", listeners[1].Addr().String())
	if ready != nil {
		ready(listeners[0].Addr(), listeners[1].Addr())
	}
	var err error
	select {
	case <-ctx.Done():
		log.Info("signal received, starting graceful shutdown")
	case err = <-failed:
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return err
}

// helpOrVersion answers --help and --version as clap does, before parsing,
// and reports whether it did: then the router exits 0.
func helpOrVersion(argv []string, stdout io.Writer) bool {
	for _, arg := range argv {
		switch arg {
		case "-h", "--help":
			fmt.Fprintln(stdout, "Text Embedding Webserver (embedops stand-in)"+usageTail)
			return true
		case "-V", "--version":
			fmt.Fprintln(stdout, "text-embeddings-router", version)
			return true
		}
	}
	return false
}
