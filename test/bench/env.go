package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// ControllerAgent is the benchmarked controller binary's name and so the
// start of its user agent (client-go's default is "<binary>/<version> ..."),
// which tells its requests apart in the audit log.
const ControllerAgent = "embedops-bench-controller"

// EnvOptions shape a benchmark environment.
type EnvOptions struct {
	// Nodes is the number of kwok nodes; zero means the harness default.
	Nodes int
	// ProvisionDelay is the provisioner's time per volume.
	ProvisionDelay time.Duration
	// ControllerArgs follow the flags the harness gives the controller.
	ControllerArgs []string
	// Profile serves the controller's net/http/pprof endpoints on loopback
	// (Env.Profile).
	Profile bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Env is a local cluster that writes an audit log, with embedops' CRDs and
// the controller running as its own process.
type Env struct {
	// Cluster is the local cluster.
	Cluster *harness.Cluster
	// Controller is the controller process.
	Controller *harness.ControllerProcess
	// Client is a direct client without client-side rate limits, for the
	// benchmark's own bulk requests.
	Client client.Client

	log io.Writer
	dir string
	// pprofAddr is the controller's pprof address, empty without Profile.
	pprofAddr string
}

// StartEnv builds the controller, starts the cluster, installs the CRDs
// and starts the controller. A failed start stops what it started.
func StartEnv(ctx context.Context, opts EnvOptions) (*Env, error) {
	dir, err := os.MkdirTemp("", "embedops-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating the benchmark directory: %w", err)
	}
	env := &Env{dir: dir, log: opts.Log}
	if env.log == nil {
		env.log = io.Discard
	}
	if err := env.start(ctx, opts); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return env, nil
}

func (e *Env) start(ctx context.Context, opts EnvOptions) error {
	e.logf("building the controller")
	binary, err := buildController(e.dir)
	if err != nil {
		return err
	}
	policy := filepath.Join(e.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy), 0o600); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}
	e.logf("starting the local cluster with %d nodes", opts.Nodes)
	if e.Cluster, err = harness.StartCluster(ctx, harness.ClusterOptions{Nodes: opts.Nodes, AuditPolicy: policy, ProvisionDelay: opts.ProvisionDelay}); err != nil {
		return err
	}
	if e.Client, err = unthrottledClient(e.Cluster); err != nil {
		return err
	}
	if err := operator.InstallCRDs(e.Cluster.Config); err != nil {
		return err
	}
	args := opts.ControllerArgs
	if opts.Profile {
		if e.pprofAddr, err = harness.FreeAddress(); err != nil {
			return err
		}
		args = append(append([]string{}, args...), "--pprof-addr="+e.pprofAddr)
	}
	e.logf("starting the controller")
	e.Controller, err = harness.StartController(ctx, binary, e.Cluster.Kubeconfig, args...)
	return err
}

// buildController builds the controller into dir under ControllerAgent's
// name, which its requests carry as their user agent.
func buildController(dir string) (string, error) {
	built, err := harness.BuildController(dir)
	if err != nil {
		return "", err
	}
	binary := filepath.Join(dir, ControllerAgent)
	if err := os.Rename(built, binary); err != nil {
		return "", fmt.Errorf("naming the controller binary: %w", err)
	}
	return binary, nil
}

// unthrottledClient is a direct client of the cluster without client-side
// rate limiting; the worker pool bounds its concurrency instead.
func unthrottledClient(cluster *harness.Cluster) (client.Client, error) {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: cluster.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return c, nil
}

// Count counts the controller's requests about objects in namespace.
func (e *Env) Count(namespace string) (Counts, error) {
	return CountRequests(e.Cluster.AuditLogPath(), ControllerAgent, namespace)
}

// Stop stops the controller and the cluster and removes the directory.
func (e *Env) Stop() error {
	var errs []error
	if e.Controller != nil {
		errs = append(errs, e.Controller.Stop())
	}
	if e.Cluster != nil {
		errs = append(errs, e.Cluster.Stop())
	}
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the benchmark directory: %w", err))
	}
	return errors.Join(errs...)
}

// logf writes a progress line.
func (e *Env) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(e.log, "bench: "+format+"\n", args...)
}
