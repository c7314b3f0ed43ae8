package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The scale-up benchmark's fleet.
const (
	// DefaultScaleUpServers is how many servers the scale-up mode scales
	// unless told otherwise.
	DefaultScaleUpServers = 100
	// scaleUpFrom and scaleUpTo are the replicas of every server before
	// and after the scale-up.
	scaleUpFrom, scaleUpTo int32 = 1, 3
	// benchPopulatorImage is the image the controller gives populate
	// containers; kwok never pulls it, and completes them with the
	// harness's simulated result.
	benchPopulatorImage = "embedops:bench"
)

// ScaleUpOptions shape the scale-up benchmark.
type ScaleUpOptions struct {
	// Servers is how many EmbeddingServers are created and scaled.
	Servers int
	// Seed is every server's spec.cache.seed.
	Seed embedopsv1.CacheSeed
	// ProvisionDelay is how long the local cluster's provisioner takes per
	// volume, a clone or a restore included.
	ProvisionDelay time.Duration
	// Timeout bounds each wait for the cluster.
	Timeout time.Duration
	// ControllerArgs follow the populator image the benchmark gives the
	// controller.
	ControllerArgs []string
	// Log receives progress lines.
	Log io.Writer
}

// Nodes is how many kwok nodes hold every pod after the scale-up, with one
// spare.
func (o ScaleUpOptions) Nodes() int {
	return max(2, (o.Servers*int(scaleUpTo)+podsPerNode-1)/podsPerNode+1)
}

// ParseSeed checks a --seed value against the API's values.
func ParseSeed(value string) (embedopsv1.CacheSeed, error) {
	seeds := []embedopsv1.CacheSeed{embedopsv1.CacheSeedAuto, embedopsv1.CacheSeedClone, embedopsv1.CacheSeedSnapshot, embedopsv1.CacheSeedDownload}
	if seed := embedopsv1.CacheSeed(value); slices.Contains(seeds, seed) {
		return seed, nil
	}
	return "", fmt.Errorf("unknown seed %q: use %v", value, seeds)
}

// scaleUpRun is one scale-up benchmark in progress.
type scaleUpRun struct {
	env    *Env
	opts   ScaleUpOptions
	report *ScaleUpReport
	// namespace holds the servers.
	namespace string
	// before are the controller's requests once the fleet settled at
	// scaleUpFrom replicas.
	before Counts
	// claims are the names of the claims before the scale-up.
	claims map[string]bool
	// writes is how many writes to the namespace the audit log held before
	// the scale-up.
	writes int
	// started is when the first replicas patch was sent.
	started time.Time
}

// RunScaleUp starts an environment with the populator on, makes
// opts.Servers PerReplica servers of seed opts.Seed Ready at one replica,
// their bindings with a recorded commit and their pods' populate results
// reported, then scales every server to three replicas and measures the
// scale-up: requests and stored writes per new replica, how the new claims
// were filled, and the time until every server is Ready again.
func RunScaleUp(ctx context.Context, opts ScaleUpOptions) (_ *ScaleUpReport, err error) {
	starting := time.Now()
	args := append([]string{"--populator-image=" + benchPopulatorImage}, opts.ControllerArgs...)
	env, err := StartEnv(ctx, EnvOptions{Nodes: opts.Nodes(), ProvisionDelay: opts.ProvisionDelay, ControllerArgs: args, Log: opts.Log})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			env.logf("controller log (last lines):\n%s\ncluster logs:\n%s", lastLines(env.Controller.Logs(), 40), env.Cluster.ComponentLogs(15))
		}
		err = errors.Join(err, env.Stop())
	}()
	run := &scaleUpRun{env: env, opts: opts, report: newScaleUpReport(opts, args)}
	run.report.Phases = append(run.report.Phases, PhaseTime{Phase: "start", Seconds: round(time.Since(starting).Seconds())})
	phases, err := runPhases(ctx, env.logf, []benchPhase{
		{"populate", run.populate},
		{"scaleUp", run.scaleUp},
		{"claims", run.countClaims},
	})
	run.report.Phases = append(run.report.Phases, phases...)
	if err != nil {
		return nil, err
	}
	return run.report, nil
}

// populate creates the servers at scaleUpFrom replicas, waits until each
// is Ready and bound, its binding has recorded a commit and a digest, and
// its pods reported them, then until the controller's requests settled,
// and notes what the cluster holds before the scale-up.
func (s *scaleUpRun) populate(ctx context.Context) error {
	var err error
	if s.namespace, err = s.env.CreateNamespace(ctx, "bench-scaleup-"); err != nil {
		return err
	}
	err = s.env.CreateServersWith(ctx, s.namespace, s.opts.Servers, func(server *embedopsv1.EmbeddingServer) {
		server.Spec.Replicas = new(scaleUpFrom)
		server.Spec.Cache.Mode = embedopsv1.CacheModePerReplica
		server.Spec.Cache.Seed = s.opts.Seed
	})
	if err != nil {
		return err
	}
	if err := s.env.WaitConverged(ctx, s.namespace, s.opts.Servers, s.opts.Timeout); err != nil {
		return err
	}
	if err := s.env.waitPopulated(ctx, s.namespace, s.opts.Servers, s.opts.Timeout); err != nil {
		return err
	}
	if s.before, err = s.env.settledCount(ctx, s.namespace, s.opts.Timeout); err != nil {
		return err
	}
	if s.claims, err = s.claimNames(ctx); err != nil {
		return err
	}
	writes, err := ObjectWrites(s.env.Cluster.AuditLogPath(), s.namespace)
	s.writes = len(writes)
	return err
}

// scaleUp scales every server to scaleUpTo replicas, times until all are
// Ready at it, and counts the requests and writes until the controller's
// requests settled.
func (s *scaleUpRun) scaleUp(ctx context.Context) error {
	startCPU, err := s.env.Controller.CPUSeconds()
	if err != nil {
		return err
	}
	startTimes, err := s.env.clientTimes(ctx)
	if err != nil {
		return err
	}
	s.started = time.Now()
	if err := s.env.scaleServers(ctx, s.namespace, s.opts.Servers, scaleUpTo); err != nil {
		return err
	}
	readyAfter, err := s.env.waitScaled(ctx, s.namespace, s.opts.Servers, scaleUpTo, s.started, s.opts.Timeout)
	if err != nil {
		return err
	}
	endCPU, err := s.env.Controller.CPUSeconds()
	if err != nil {
		return err
	}
	s.report.setReady(readyAfter, endCPU-startCPU)
	endTimes, err := s.env.clientTimes(ctx)
	if err != nil {
		return err
	}
	s.report.setLimiter(endTimes.waited-startTimes.waited, endTimes.sent-startTimes.sent)
	after, err := s.env.settledCount(ctx, s.namespace, s.opts.Timeout)
	if err != nil {
		return err
	}
	s.report.setRequests(Since(s.before, after))
	writes, err := ObjectWrites(s.env.Cluster.AuditLogPath(), s.namespace)
	if err != nil {
		return err
	}
	s.report.setClusterWrites(writes[min(s.writes, len(writes)):])
	return nil
}

// countClaims classifies the claims the scale-up created by their data
// source, times when they were created and their volumes provisioned, and
// reads the bindings' records of them and the snapshots.
func (s *scaleUpRun) countClaims(ctx context.Context) error {
	var claims corev1.PersistentVolumeClaimList
	if err := s.env.Client.List(ctx, &claims, client.InNamespace(s.namespace)); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	s.report.NewClaims = classifyClaims(claims.Items, s.claims)
	var volumes corev1.PersistentVolumeList
	if err := s.env.Client.List(ctx, &volumes); err != nil {
		return fmt.Errorf("listing volumes: %w", err)
	}
	s.report.setClaimTimes(newClaimTimes(claims.Items, volumes.Items, s.claims, s.started))
	var bindings embedopsv1.ModelCacheBindingList
	if err := s.env.Client.List(ctx, &bindings, client.InNamespace(s.namespace)); err != nil {
		return fmt.Errorf("listing bindings: %w", err)
	}
	s.report.ClaimFills, s.report.ClaimFallbacks = fillsByMethod(bindings.Items)
	var snapshots snapshotv1.VolumeSnapshotList
	if err := s.env.Client.List(ctx, &snapshots, client.InNamespace(s.namespace)); err != nil {
		return fmt.Errorf("listing VolumeSnapshots: %w", err)
	}
	s.report.Snapshots = len(snapshots.Items)
	return nil
}

// claimNames are the names of the claims in the servers' namespace.
func (s *scaleUpRun) claimNames(ctx context.Context) (map[string]bool, error) {
	var claims corev1.PersistentVolumeClaimList
	if err := s.env.Client.List(ctx, &claims, client.InNamespace(s.namespace)); err != nil {
		return nil, fmt.Errorf("listing claims: %w", err)
	}
	names := make(map[string]bool, len(claims.Items))
	for _, claim := range claims.Items {
		names[claim.Name] = true
	}
	return names, nil
}

// scaleServers sets spec.replicas of servers s0..s<n-1> in namespace with
// a merge patch on the worker pool.
func (e *Env) scaleServers(ctx context.Context, namespace string, n int, replicas int32) error {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	return forEach(ctx, n, func(ctx context.Context, i int) error {
		server := &embedopsv1.EmbeddingServer{}
		server.Namespace, server.Name = namespace, serverName(i)
		if err := e.Client.Patch(ctx, server, patch, client.FieldOwner(benchFieldManager)); err != nil {
			return fmt.Errorf("scaling server %s: %w", server.Name, err)
		}
		return nil
	})
}
