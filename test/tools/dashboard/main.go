// Command dashboard draws config/grafana/embedops.json from real metrics:
// it starts the local kwok cluster, the controller as its own process, the
// hub and TEI stand-ins, creates a few EmbeddingServers (one whose pods
// cannot pull their image, one deleted halfway), sends the TEI stand-in
// embedding requests, scrapes both every few seconds into a Prometheus
// TSDB, evaluates each panel's queries with Prometheus's engine as Grafana
// would ask them, and draws the panels on Grafana's grid into a PNG.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	var opts options
	flag.StringVar(&opts.dashboard, "dashboard", "config/grafana/embedops.json", "The dashboard to draw.")
	flag.StringVar(&opts.out, "o", "docs/grafana-dashboard.png", "The PNG to write.")
	flag.DurationVar(&opts.duration, "for", 2*time.Minute, "How long to record metrics.")
	flag.DurationVar(&opts.interval, "scrape-interval", 2*time.Second, "How often to scrape.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	dashboard, out     string
	duration, interval time.Duration
}

func run(ctx context.Context, opts options) error {
	d, err := LoadDashboard(opts.dashboard)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "embedops-dashboard-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	rec, err := startRecording(ctx, work)
	if err != nil {
		return err
	}
	defer rec.stop()
	start, end, err := rec.record(ctx, opts.duration, opts.interval)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "dashboard: recorded %d samples from %s to %s\n", rec.samples, start.Format(time.TimeOnly), end.Format(time.TimeOnly))
	png, err := rec.draw(ctx, d, start, end, opts.interval)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(opts.out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(opts.out)
	if err != nil {
		return err
	}
	if _, err := png.WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", opts.out, err)
	}
	return f.Close()
}
