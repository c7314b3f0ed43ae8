// Command bench measures embedops and prints a table or JSON: `--mode
// scale` (the default) runs the controller against N servers on the local
// kwok cluster; `--mode audit` times the audit's origin search on a
// generated history; `--mode shard` splits --servers between two
// controller processes, --watch-label-selector=sharding.fluxcd.io/key=shard1
// and =shard2 (Flux's sharding), and attributes every write in the audit
// log to a shard; `--mode download` compares `embedops populate` with
// plain GETs from the stand-in hub on loopback; `--mode rollout` runs a
// 3-replica server through every change of its cache and reports the
// fewest ready endpoints of its Service and each change's time; `--mode
// scaleup` scales --servers PerReplica servers (100 unless given), with
// the populator and spec.cache.seed --seed, from one replica to three and
// reports the requests and writes per new replica, how the new claims
// were filled and the time until all are Ready. See package bench for
// what each figure means.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	flag "github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/bench"
)

func main() {
	var (
		mode, output     string
		jsonFile, seed   string
		commits          int
		download         = bench.DownloadOptions{}
		progressInterval time.Duration
		opts             = bench.ScaleOptions{Log: os.Stderr}
	)
	flag.StringVar(&mode, "mode", "scale", "What to measure: scale (the controller on the local cluster), shard (two shards of the fleet, from the audit log), audit (the origin search), download (the populator's throughput), rollout (cache changes of a 3-replica server) or scaleup (PerReplica servers scaled 1 -> 3, new claims seeded).")
	flag.StringVarP(&output, "output", "o", "table", "Output format: table or json.")
	flag.StringVar(&jsonFile, "json-file", "", "Also write the report as JSON to this file, so one run gives both the table and the JSON.")
	flag.IntVar(&opts.Servers, "servers", 200, fmt.Sprintf("EmbeddingServers to create; --mode scaleup's default is %d.", bench.DefaultScaleUpServers))
	flag.IntVar(&opts.UnrelatedPods, "unrelated-pods", 5000, "Pods, and as many ConfigMaps and Secrets, not embedops', created before the second memory reading.")
	flag.IntVar(&opts.ReleasedRecords, "released-records", 200, "Released bindings of deleted servers added to the servers' namespace before the reconcile requests are counted again.")
	flag.DurationVar(&opts.ProvisionDelay, "provision-delay", 10*time.Second, "How long the local cluster's provisioner takes per volume, so claims bind slowly as real provisioners' do.")
	flag.IntVar(&opts.Resyncs, "resyncs", 10, "Rounds of each forced resync per Ready server: reconcile requests (reconcile.fluxcd.io/requestedAt), then StatefulSet annotation touches.")
	flag.DurationVar(&opts.Rest, "rest", time.Minute, "Each rest window, over which CPU at rest is measured and the heap sampled.")
	flag.StringVar(&opts.ProfileDir, "profile", "", "A directory that receives a CPU profile (pprof) of the controller over each rest window: rest.pprof, and rest-unrelated.pprof with the unrelated objects.")
	flag.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "Bound of each wait for the cluster.")
	flag.DurationVar(&progressInterval, "progress-interval", 0, "The controller's --progress-interval; 0 keeps its default.")
	flag.IntVar(&commits, "commits", 10000, "Commits in the audit mode's history.")
	flag.StringVar(&seed, "seed", string(embedopsv1.CacheSeedClone), "The scaleup mode's spec.cache.seed: Auto, Clone, Snapshot or Download.")
	flag.Int64Var(&download.Bytes, "download-bytes", 1<<30, "The download mode's repository size in bytes.")
	flag.IntVar(&download.Files, "download-files", 4, "Weight files the download mode's repository is split into.")
	flag.Parse()
	if mode == "scaleup" && !flag.CommandLine.Changed("servers") {
		opts.Servers = bench.DefaultScaleUpServers
	}
	if opts.ProfileDir != "" {
		if err := os.MkdirAll(opts.ProfileDir, 0o750); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if progressInterval > 0 {
		opts.ControllerArgs = append(opts.ControllerArgs, "--progress-interval="+progressInterval.String())
	}

	// The benchmark's own clients have nothing to log.
	ctrl.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, mode, output, jsonFile, commits, download, seed, opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

// run measures what mode names and prints the report, and writes it as
// JSON to jsonFile when set.
func run(ctx context.Context, mode, output, jsonFile string, commits int, download bench.DownloadOptions, seed string, opts bench.ScaleOptions) error {
	var report bench.Report
	var err error
	switch mode {
	case "scale":
		report, err = bench.RunScale(ctx, opts)
	case "shard":
		var shards *bench.ShardReport
		shards, err = bench.RunShards(ctx, bench.ShardOptions{Servers: opts.Servers, Shards: 2, ProvisionDelay: opts.ProvisionDelay,
			Timeout: opts.Timeout, ControllerArgs: opts.ControllerArgs, Log: opts.Log})
		if err == nil && !shards.Sharded() {
			err = fmt.Errorf("a shard wrote another shard's objects: %+v", *shards)
		}
		report = shards
	case "audit":
		report, err = bench.RunOriginSearch(ctx, commits)
	case "download":
		report, err = bench.MeasureDownload(ctx, download)
	case "rollout":
		report, err = bench.RunRollout(ctx, opts)
	case "scaleup":
		report, err = runScaleUp(ctx, seed, opts)
	default:
		return fmt.Errorf("unknown mode %q: use scale, shard, audit, download, rollout or scaleup", mode)
	}
	if err != nil {
		return err
	}
	if jsonFile != "" {
		if err := writeJSON(jsonFile, report); err != nil {
			return err
		}
	}
	return bench.Print(os.Stdout, report, output)
}

// runScaleUp runs the scaleup mode with the scale options' fleet, cluster
// and controller, and seed.
func runScaleUp(ctx context.Context, seed string, opts bench.ScaleOptions) (bench.Report, error) {
	parsed, err := bench.ParseSeed(seed)
	if err != nil {
		return nil, err
	}
	return bench.RunScaleUp(ctx, bench.ScaleUpOptions{Servers: opts.Servers, Seed: parsed, ProvisionDelay: opts.ProvisionDelay,
		Timeout: opts.Timeout, ControllerArgs: opts.ControllerArgs, Log: opts.Log})
}

// writeJSON writes report as JSON to path.
func writeJSON(path string, report bench.Report) error {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := bench.Print(file, report, "json"); err != nil {
		_ = file.Close()
		return err
	}
	return file.Close()
}
