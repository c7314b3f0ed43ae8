package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	// Controllers, when set, replace the one controller: each runs as its
	// own process under its Agent's name, with its Args after
	// ControllerArgs (the shards of a sharded fleet).
	Controllers []ControllerSpec
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// ControllerSpec is one controller process of an environment.
type ControllerSpec struct {
	// Agent is the binary's name and so the start of its user agent in the
	// audit log; it must not start with another controller's Agent.
	Agent string
	// Args are the process's own flags.
	Args []string
}

// Env is a local cluster that writes an audit log, with embedops' CRDs and
// the controller running as its own process.
type Env struct {
	// Cluster is the local cluster.
	Cluster *harness.Cluster
	// Controller is the controller process (the first of Controllers).
	Controller *harness.ControllerProcess
	// Controllers are the controller processes, in EnvOptions.Controllers'
	// order.
	Controllers []*harness.ControllerProcess
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
	built, err := harness.BuildController(e.dir)
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
	args := slices.Clone(opts.ControllerArgs)
	if opts.Profile {
		if e.pprofAddr, err = harness.FreeAddress(); err != nil {
			return err
		}
		args = append(args, "--pprof-addr="+e.pprofAddr)
	}
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = []ControllerSpec{{Agent: ControllerAgent}}
	}
	for _, spec := range controllers {
		e.logf("starting the controller %s", spec.Agent)
		binary, err := agentBinary(built, e.dir, spec.Agent)
		if err != nil {
			return err
		}
		process, err := harness.StartController(ctx, binary, e.Cluster.Kubeconfig, append(slices.Clone(args), spec.Args...)...)
		if err != nil {
			return err
		}
		e.Controllers = append(e.Controllers, process)
	}
	e.Controller = e.Controllers[0]
	return nil
}

// agentBinary links the built controller into dir under agent's name,
// which its requests carry as their user agent (client-go's default is
// "<binary>/<version> ...").
func agentBinary(built, dir, agent string) (string, error) {
	binary := filepath.Join(dir, agent)
	if err := os.Link(built, binary); err != nil {
		return "", fmt.Errorf("naming the controller binary %s: %w", agent, err)
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
	for _, controller := range e.Controllers {
		errs = append(errs, controller.Stop())
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
