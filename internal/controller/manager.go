package controller

import (
	"context"
	"crypto/tls"
	"fmt"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/probes"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/binding"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/controller/metrics"
	"github.com/embedops/embedops/internal/controller/schema"
	"github.com/embedops/embedops/internal/controller/watch"
	"github.com/embedops/embedops/internal/kubeversion"
)

// ManagerOptions configure the controller manager.
type ManagerOptions struct {
	// MetricsAddr serves Prometheus metrics; "0" disables them.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS, and only to requests whose
	// bearer token the API server authenticates (TokenReview) and allows to
	// get the non-resource URL /metrics (SubjectAccessReview).
	MetricsSecure bool
	// MetricsCertDir holds the metrics server's tls.crt and tls.key; empty
	// means a self-signed certificate generated at start.
	MetricsCertDir string
	// HealthAddr serves /healthz and /readyz.
	HealthAddr string
	// PprofAddr serves net/http/pprof's /debug/pprof/ endpoints; empty or
	// "0" disables them.
	PprofAddr string
	// LeaderElection configures leader election.
	LeaderElection leaderelection.Options
	// LeaderElectionNamespace holds the lease; empty means the namespace the
	// controller runs in, which a controller outside a cluster must set.
	LeaderElectionNamespace string
	// EmbeddingServer configures the EmbeddingServer reconciler.
	EmbeddingServer EmbeddingServerReconcilerOptions
	// ModelCacheBinding configures the ModelCacheBinding reconciler.
	ModelCacheBinding binding.Options
	// Watch holds Flux's --watch-label-selector: a shard's controller
	// reconciles only the servers and bindings it selects.
	Watch runtimectrl.WatchOptions
}

// NewScheme returns the scheme of every kind the controller reads.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, snapshotv1.AddToScheme, embedopsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	return scheme, nil
}

// NewManager returns a manager with health probes, metrics and leader
// election, whose cache is shaped by watch.CacheOptions and whose client never
// reads Secrets from the cache (watch.ClientOptions). It runs no reconciler yet:
// see SetupReconcilers.
func NewManager(cfg *rest.Config, opts ManagerOptions) (ctrl.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	selector, err := watch.Selector(opts.Watch)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         watch.CacheOptions(selector),
		Client:                        watch.ClientOptions(),
		Metrics:                       MetricsOptions(opts),
		HealthProbeBindAddress:        opts.HealthAddr,
		PprofBindAddress:              opts.PprofAddr,
		LeaderElection:                opts.LeaderElection.Enable,
		LeaderElectionID:              watch.ShardLeaderElectionID(opts.Watch),
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: opts.LeaderElection.ReleaseOnCancel,
		LeaseDuration:                 &opts.LeaderElection.LeaseDuration,
		RenewDeadline:                 &opts.LeaderElection.RenewDeadline,
		RetryPeriod:                   &opts.LeaderElection.RetryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	probes.SetupChecks(mgr, ctrl.Log.WithName("probes"))
	metrics.UseReader(mgr.GetCache())
	return mgr, nil
}

// MetricsOptions are the metrics server's options: plain HTTP, or with
// opts.MetricsSecure HTTPS (HTTP/1.1 only) behind controller-runtime's
// authentication and authorization filter, as kubebuilder scaffolds it.
func MetricsOptions(opts ManagerOptions) metricsserver.Options {
	options := metricsserver.Options{BindAddress: opts.MetricsAddr}
	if !opts.MetricsSecure {
		return options
	}
	options.SecureServing = true
	options.FilterProvider = filters.WithAuthenticationAndAuthorization
	options.CertDir = opts.MetricsCertDir
	options.TLSOpts = []func(*tls.Config){disableHTTP2}
	return options
}

// disableHTTP2 keeps the metrics server on HTTP/1.1, out of reach of the
// HTTP/2 Stream Cancellation and Rapid Reset attacks (CVE-2023-44487,
// CVE-2023-39325), as kubebuilder's scaffold does by default.
func disableHTTP2(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}

// SetupReconcilers registers embedops' reconcilers with mgr; they share one
// event recorder and one ledger, the only writer of bindings.
func SetupReconcilers(ctx context.Context, mgr ctrl.Manager, opts ManagerOptions) error {
	recorder, err := events.NewRecorder(mgr.GetLogger().WithName("events"), "", embedopsv1.FieldManager, events.WithManager(mgr))
	if err != nil {
		return fmt.Errorf("creating the event recorder: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &embedopsv1.ModelCacheBinding{}, ledger.ReferenceIndex, ledger.ReferencedServers); err != nil {
		return fmt.Errorf("indexing bindings by referenced server: %w", err)
	}
	selector, err := watch.Selector(opts.Watch)
	if err != nil {
		return err
	}
	l := ledger.New(mgr.GetClient(), mgr.GetAPIReader(), recorder, ledger.Options{
		HistoryLimit: opts.ModelCacheBinding.HistoryLimit, ReleaseInterval: opts.ModelCacheBinding.ReleaseInterval,
		ShardKeys: watch.ShardKeys(selector), Selector: selector, FirstReferenceWait: opts.ModelCacheBinding.FirstReferenceWait,
	})
	if err := (&EmbeddingServerReconciler{}).SetupWithManager(ctx, mgr, recorder, l, opts.EmbeddingServer); err != nil {
		return fmt.Errorf("setting up the EmbeddingServer reconciler: %w", err)
	}
	if err := (&binding.Reconciler{ShardKeys: watch.ShardKeys(selector)}).SetupWithManager(ctx, mgr, l); err != nil {
		return fmt.Errorf("setting up the ModelCacheBinding reconciler: %w", err)
	}
	return nil
}

// Run checks that the API server's Kubernetes is not older than
// kubeversion.Floor and that the CRDs are not older than the controller
// (schema.Check), then starts a manager with its reconcilers and blocks
// until ctx ends. A failed check returns its error, which names what was
// found and the upgrade: the controller writes nothing, and its process
// ends, so it never becomes ready and a rolling upgrade leaves the
// previous controller running.
func Run(ctx context.Context, cfg *rest.Config, opts ManagerOptions) error {
	server, err := kubeversion.CheckConfig(cfg)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("kubeversion").Info("Kubernetes version", "server", server.GitVersion, "floor", kubeversion.Floor, "compared", server.Compared)
	if err := schema.CheckConfig(ctx, cfg); err != nil {
		return err
	}
	mgr, err := NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := SetupReconcilers(ctx, mgr, opts); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}
