package main

import (
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/logger"
	flag "github.com/spf13/pflag"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/internal/controller/binding"
	"github.com/embedops/embedops/internal/controller/endpoint"
	"github.com/embedops/embedops/internal/controller/watch"
	"github.com/embedops/embedops/internal/provenance"
)

// flags are the command line: the manager's options as the flags set them,
// and the values that still need a check or a conversion (managerOptions).
type flags struct {
	opts          controller.ManagerOptions
	client        runtimeclient.Options
	log           logger.Options
	endpointCheck string
	proberLabels  string
}

// bindFlags registers every flag of the controller on fs.
func bindFlags(fs *flag.FlagSet) *flags {
	f := &flags{}
	f.bindManager(fs)
	f.bindServers(fs)
	f.bindEndpointCheck(fs)
	fs.IntVar(&f.opts.ModelCacheBinding.HistoryLimit, "binding-history-limit", binding.DefaultHistoryLimit,
		"How many Released ModelCacheBindings are kept per server as audit records; older ones are deleted.")
	watch.BindFlags(fs, &f.opts.Watch)
	f.opts.LeaderElection.BindFlags(fs)
	f.client.BindFlags(fs)
	f.log.BindFlags(fs)
	return f
}

// bindManager registers the manager's own endpoints and its lease.
func (f *flags) bindManager(fs *flag.FlagSet) {
	fs.StringVar(&f.opts.MetricsAddr, "metrics-addr", ":8443", "The address the metrics endpoint binds to; 0 disables it.")
	fs.BoolVar(&f.opts.MetricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS to clients whose token may get /metrics (TokenReview and SubjectAccessReview); false serves plain HTTP to anyone.")
	fs.StringVar(&f.opts.MetricsCertDir, "metrics-cert-dir", "",
		"The directory holding tls.crt and tls.key for the metrics endpoint; empty means a self-signed certificate.")
	fs.StringVar(&f.opts.HealthAddr, "health-addr", ":9440", "The address the health endpoint binds to.")
	fs.StringVar(&f.opts.PprofAddr, "pprof-addr", "", "The address net/http/pprof's /debug/pprof/ endpoints bind to; empty or 0 disables them.")
	fs.StringVar(&f.opts.LeaderElectionNamespace, "leader-election-namespace", "",
		"The namespace of the leader election lease; empty means the controller's own namespace (set it outside a cluster).")
}

// bindServers registers how EmbeddingServers are reconciled.
func (f *flags) bindServers(fs *flag.FlagSet) {
	server := &f.opts.EmbeddingServer
	fs.IntVar(&server.MaxConcurrentReconciles, "concurrent", 4, "The number of EmbeddingServers reconciled at once.")
	fs.DurationVar(&server.ProgressInterval, "progress-interval", controller.DefaultProgressInterval,
		"How often a server whose pods are not ready is checked again when no event arrives.")
	// Kept so that manifests which still pass it start: a new server's
	// status is written by its first reconcile.
	fs.Duration("first-status-wait", 0, "Ignored: a new server's status is written by its first reconcile.")
	_ = fs.MarkDeprecated("first-status-wait", "a new server's status is written by its first reconcile; the flag does nothing and will be removed")
	fs.StringVar(&server.PopulatorImage, "populator-image", "",
		"The image whose /embedops populate fills PerReplica caches as an init container before TEI starts offline; "+
			"config/manager passes the controller's own image. Empty: TEI downloads the model itself.")
	fs.StringVar(&server.ArgoCDNamespace, "argocd-namespace", provenance.DefaultArgoCDNamespace,
		"Argo CD's own namespace, where the Applications that tracking ids and instance labels name without a namespace live.")
	fs.StringVar(&server.ClusterDomain, "cluster-domain", controller.DefaultClusterDomain,
		"The cluster's DNS domain, the suffix of the in-cluster address in status.url.")
	fs.DurationVar(&server.PopulateDeadline, "populate-deadline", controller.DefaultPopulateDeadline,
		"How long a Shared cache's populate Job may run (its activeDeadlineSeconds) before it fails and the server reports why; 0 means no deadline.")
}

// bindEndpointCheck registers the check that asks ready pods for TEI's /info.
func (f *flags) bindEndpointCheck(fs *flag.FlagSet) {
	fs.StringVar(&f.endpointCheck, "endpoint-check", endpoint.CheckAuto,
		"Whether ready pods are asked for TEI's /info through their Service: auto (on when running in a cluster), on or off.")
	fs.DurationVar(&f.opts.EmbeddingServer.EndpointInterval, "endpoint-interval", controller.DefaultEndpointInterval,
		"How often a ready server's /info is asked again when the endpoint check is on.")
	fs.StringVar(&f.proberLabels, "endpoint-check-pod-labels", endpoint.DefaultProberLabels,
		"The labels of the controller's own pods: a server's NetworkPolicy admits them, in the namespace named by "+endpoint.PodNamespaceEnv+
			" (the downward API), to TEI's HTTP port while the endpoint check is on.")
}

// managerOptions checks the flags and completes the options with what they
// resolve to: podNamespace is the controller's namespace (empty outside a
// cluster) and inCluster says whether it runs in one.
func (f *flags) managerOptions(podNamespace string, inCluster func() bool) (controller.ManagerOptions, error) {
	opts := f.opts
	var err error
	if opts.EmbeddingServer.EndpointCheck, err = endpoint.ResolveCheck(f.endpointCheck, inCluster); err != nil {
		return opts, err
	}
	if opts.EmbeddingServer.EndpointProber, err = endpoint.Prober(podNamespace, f.proberLabels); err != nil {
		return opts, err
	}
	return opts, nil
}
