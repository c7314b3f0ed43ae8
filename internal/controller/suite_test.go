package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/embedops/embedops/internal/controller/binding"
	"github.com/embedops/embedops/internal/controller/watch"
	"github.com/embedops/embedops/test/harness"
)

// env is the envtest control plane shared by this package's tests; each test
// works in a namespace of its own, reconciled by a manager of its own.
var env *harness.Env

func TestMain(m *testing.M) {
	// EMBEDOPS_TEST_LOG=1 shows the managers' logs.
	logger := logr.Discard()
	if os.Getenv("EMBEDOPS_TEST_LOG") != "" {
		logger = zap.New(zap.UseDevMode(true))
	}
	ctrl.SetLogger(logger)
	// Flux's and Argo CD's CRDs are installed so bindings can record their
	// sources; test/e2e and test/dev run without them. The snapshot CRDs
	// let servers seed replicas from VolumeSnapshots.
	crds, err := harness.ThirdPartyCRDPaths()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	snapshots, err := harness.SnapshotCRDPath()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	crds = append(crds, snapshots)
	os.Exit(harness.RunWithEnv(m, &env, harness.EnvOptions{ExtraCRDPaths: crds}))
}

// testTimeout bounds every Eventually: envtest answers in milliseconds, so a
// condition not reached by then is a bug.
const testTimeout = 30 * time.Second

// newG returns a Gomega for t with the package's Eventually timing.
func newG(t *testing.T) *WithT {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(testTimeout)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	g.SetDefaultConsistentlyDuration(2 * time.Second)
	g.SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	return g
}

// startManager runs, until the test ends, a manager that reconciles the
// namespace with the production cache and client options and the
// reconcilers of SetupReconcilers, changed by options (whose Watch shapes
// the cache as --watch-label-selector does). Its writes are counted.
func startManager(t *testing.T, namespace string, options ...func(*ManagerOptions)) *writeCounter {
	t.Helper()
	return startManagerWrapping(t, namespace, nil, options...)
}

// startManagerWrapping starts the reconcilers like startManager, their
// client wrapped by wrap (nil: unwrapped).
func startManagerWrapping(t *testing.T, namespace string, wrap func(client.Client) client.Client, options ...func(*ManagerOptions)) *writeCounter {
	t.Helper()
	return startManagerOver(t, []string{namespace}, wrap, options...)
}

// startManagerOver starts the reconcilers like startManagerWrapping, one
// manager reconciling every namespace of namespaces, as the controller
// reconciles every namespace of a cluster.
func startManagerOver(t *testing.T, namespaces []string, wrap func(client.Client) client.Client, options ...func(*ManagerOptions)) *writeCounter {
	t.Helper()
	writes := newWriteCounter()
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(writes.wrap)

	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	opts := ManagerOptions{
		EmbeddingServer: EmbeddingServerReconcilerOptions{
			MaxConcurrentReconciles: 2,
			ProgressInterval:        5 * time.Second,
		},
		// envtest binds no claim: a new server references its binding at
		// once, as it does once its claims are Bound (ledger_firstref_test
		// runs the wait).
		ModelCacheBinding: binding.Options{ReleaseInterval: 100 * time.Millisecond, FirstReferenceWait: -1},
	}
	for _, option := range options {
		option(&opts)
	}
	selector, err := watch.Selector(opts.Watch)
	if err != nil {
		t.Fatal(err)
	}
	cacheOptions := watch.CacheOptions(selector)
	cacheOptions.DefaultNamespaces = map[string]cache.Config{}
	for _, namespace := range namespaces {
		cacheOptions.DefaultNamespaces[namespace] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   cacheOptions,
		Client:  watch.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Every test runs its own manager in this process.
		Controller: config.Controller{SkipNameValidation: new(true)},
		NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
			c, err := client.New(config, options)
			if err != nil || wrap == nil {
				return c, err
			}
			return wrap(c), nil
		},
	})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := SetupReconcilers(ctx, mgr, opts); err != nil {
		cancel()
		t.Fatalf("setting up the reconcilers: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("running the manager: %v", err)
		}
	})
	return writes
}

// reconciledNamespace starts a parallel test in a namespace of its own,
// reconciled by a manager of its own with the default options.
func reconciledNamespace(t *testing.T) (*WithT, string) {
	t.Helper()
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace)
	return g, namespace
}
