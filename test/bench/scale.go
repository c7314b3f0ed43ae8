package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// podsPerNode is the pod capacity of a kwok node (kwokctl's default).
const podsPerNode = 110

// settleInterval is how long the controller's requests must stay unchanged
// for creation to count as over.
const settleInterval = 3 * time.Second

// ScaleOptions shape the scale benchmark.
type ScaleOptions struct {
	// Servers is how many EmbeddingServers are created.
	Servers int
	// UnrelatedPods is how many pods, and as many ConfigMaps and Secrets,
	// not embedops', are created before the second memory reading.
	UnrelatedPods int
	// ReleasedRecords is how many Released bindings of deleted servers the
	// history phase adds to the servers' namespace.
	ReleasedRecords int
	// ProvisionDelay is how long the local cluster's provisioner takes per
	// volume, so claims bind slowly, as real provisioners' do.
	ProvisionDelay time.Duration
	// Resyncs is how many rounds of each forced resync every Ready server
	// gets: reconcile requests, then StatefulSet touches.
	Resyncs int
	// Rest is the length of each rest window.
	Rest time.Duration
	// Timeout bounds each wait for the cluster.
	Timeout time.Duration
	// ControllerArgs are extra controller flags.
	ControllerArgs []string
	// ProfileDir, when set, receives a CPU profile of the controller over
	// each rest window (rest.pprof, rest-unrelated.pprof), taken from its
	// net/http/pprof endpoint.
	ProfileDir string
	// Log receives progress lines.
	Log io.Writer
}

// Nodes is how many kwok nodes hold every pod of the run, with one spare.
func (o ScaleOptions) Nodes() int {
	return max(2, (o.Servers+o.UnrelatedPods+podsPerNode-1)/podsPerNode+1)
}

// scaleRun is one scale benchmark in progress.
type scaleRun struct {
	env    *Env
	opts   ScaleOptions
	report *ScaleReport
	// namespace holds the servers.
	namespace string
	// created counts the controller's requests once creation settled.
	created Counts
	// restWrites adds up the controller's writes in the rest windows.
	restWrites map[string]int
	// clientTimes are the controller's client times when creation began.
	clientTimes clientTimes
}

// RunScale starts an environment and runs the scale phases in order:
// convergence, reconcile requests, reconcile requests with Released
// records, watch resyncs, rest, and rest with unrelated objects.
func RunScale(ctx context.Context, opts ScaleOptions) (_ *ScaleReport, err error) {
	starting := time.Now()
	env, err := StartEnv(ctx, EnvOptions{Nodes: opts.Nodes(), ProvisionDelay: opts.ProvisionDelay, ControllerArgs: opts.ControllerArgs, Profile: opts.ProfileDir != "", Log: opts.Log})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			env.logf("controller log (last lines):\n%s\ncluster logs:\n%s", lastLines(env.Controller.Logs(), 40), env.Cluster.ComponentLogs(15))
		}
		err = errors.Join(err, env.Stop())
	}()
	run := &scaleRun{env: env, opts: opts, report: newScaleReport(opts), restWrites: map[string]int{}}
	run.report.Phases = append(run.report.Phases, PhaseTime{Phase: "start", Seconds: round(time.Since(starting).Seconds())})
	phases, err := runPhases(ctx, env.logf, []benchPhase{
		{"converge", run.converge},
		{"resync", run.resync},
		{"history", run.history},
		{"watchResync", run.watchResync},
		{"rest", run.rest},
		{"unrelated", run.unrelated},
	})
	run.report.Phases = append(run.report.Phases, phases...)
	if err != nil {
		return nil, err
	}
	return run.report, nil
}

// settledCount polls the controller's requests about namespace until they
// stop changing for settleInterval, and returns them.
func (e *Env) settledCount(ctx context.Context, namespace string, timeout time.Duration) (Counts, error) {
	var last Counts
	lastTotal := -1
	err := wait.PollUntilContextTimeout(ctx, settleInterval, timeout, true, func(context.Context) (bool, error) {
		counts, err := e.Count(namespace)
		if err != nil {
			return false, err
		}
		total := Total(counts.Requests)
		settled := total == lastTotal
		last, lastTotal = counts, total
		return settled, nil
	})
	if err != nil {
		return Counts{}, fmt.Errorf("waiting for the controller's requests to settle: %w", err)
	}
	return last, nil
}

// round keeps four decimal places.
func round(x float64) float64 {
	return math.Round(x*1e4) / 1e4
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// benchPhase is one timed phase of a benchmark run.
type benchPhase struct {
	name string
	run  func(context.Context) error
}

// runPhases runs the phases in order, logging each, and returns how long
// each that finished took; it stops at the first error.
func runPhases(ctx context.Context, logf func(string, ...any), phases []benchPhase) ([]PhaseTime, error) {
	var times []PhaseTime
	for _, phase := range phases {
		logf("phase %s", phase.name)
		started := time.Now()
		if err := phase.run(ctx); err != nil {
			return times, fmt.Errorf("phase %s: %w", phase.name, err)
		}
		times = append(times, PhaseTime{Phase: phase.name, Seconds: round(time.Since(started).Seconds())})
	}
	return times, nil
}
