// Command controller runs embedops' controller manager.
package main

import (
	goflag "flag"
	"fmt"
	"os"
	"time"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/logger"
	flag "github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/internal/provenance"
)

func main() {
	var (
		opts            controller.ManagerOptions
		clientOptions   runtimeclient.Options
		logOptions      logger.Options
		endpointCheck   string
		proberLabels    string
		firstStatusWait time.Duration
	)
	flag.StringVar(&opts.MetricsAddr, "metrics-addr", ":8443", "The address the metrics endpoint binds to; 0 disables it.")
	flag.BoolVar(&opts.MetricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS to clients whose token may get /metrics (TokenReview and SubjectAccessReview); false serves plain HTTP to anyone.")
	flag.StringVar(&opts.MetricsCertDir, "metrics-cert-dir", "",
		"The directory holding tls.crt and tls.key for the metrics endpoint; empty means a self-signed certificate.")
	flag.StringVar(&opts.HealthAddr, "health-addr", ":9440", "The address the health endpoint binds to.")
	flag.StringVar(&opts.PprofAddr, "pprof-addr", "", "The address net/http/pprof's /debug/pprof/ endpoints bind to; empty or 0 disables them.")
	flag.IntVar(&opts.EmbeddingServer.MaxConcurrentReconciles, "concurrent", 4, "The number of EmbeddingServers reconciled at once.")
	flag.DurationVar(&opts.EmbeddingServer.ProgressInterval, "progress-interval", controller.DefaultProgressInterval,
		"How often a server whose pods are not ready is checked again when no event arrives.")
	flag.DurationVar(&firstStatusWait, "first-status-wait", controller.DefaultFirstStatusWait,
		"How long a new server's status may stay unwritten while it only reports progress (observedGeneration -1 reads as in progress); 0 writes every observation.")
	flag.StringVar(&endpointCheck, "endpoint-check", controller.EndpointCheckAuto,
		"Whether ready pods are asked for TEI's /info through their Service: auto (on when running in a cluster), on or off.")
	flag.DurationVar(&opts.EmbeddingServer.EndpointInterval, "endpoint-interval", controller.DefaultEndpointInterval,
		"How often a ready server's /info is asked again when the endpoint check is on.")
	flag.StringVar(&opts.EmbeddingServer.PopulatorImage, "populator-image", "",
		"The image whose /embedops populate fills PerReplica caches as an init container before TEI starts offline; "+
			"config/manager passes the controller's own image. Empty: TEI downloads the model itself.")
	flag.IntVar(&opts.ModelCacheBinding.HistoryLimit, "binding-history-limit", controller.DefaultBindingHistoryLimit,
		"How many Released ModelCacheBindings are kept per server as audit records; older ones are deleted.")
	flag.StringVar(&opts.EmbeddingServer.ArgoCDNamespace, "argocd-namespace", provenance.DefaultArgoCDNamespace,
		"Argo CD's own namespace, where the Applications that tracking ids and instance labels name without a namespace live.")
	flag.StringVar(&opts.EmbeddingServer.ClusterDomain, "cluster-domain", controller.DefaultClusterDomain,
		"The cluster's DNS domain, the suffix of the in-cluster address in status.url.")
	flag.StringVar(&proberLabels, "endpoint-check-pod-labels", controller.DefaultEndpointProberLabels,
		"The labels of the controller's own pods: a server's NetworkPolicy admits them, in the namespace named by "+controller.PodNamespaceEnv+
			" (the downward API), to TEI's HTTP port while the endpoint check is on.")
	flag.DurationVar(&opts.EmbeddingServer.PopulateDeadline, "populate-deadline", controller.DefaultPopulateDeadline,
		"How long a Shared cache's populate Job may run (its activeDeadlineSeconds) before it fails and the server reports why; 0 means no deadline.")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "",
		"The namespace of the leader election lease; empty means the controller's own namespace (set it outside a cluster).")
	controller.BindWatchFlags(flag.CommandLine, &opts.Watch)
	opts.LeaderElection.BindFlags(flag.CommandLine)
	clientOptions.BindFlags(flag.CommandLine)
	logOptions.BindFlags(flag.CommandLine)
	// controller-runtime registers --kubeconfig on the Go flag set.
	flag.CommandLine.AddGoFlagSet(goflag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(logger.NewLogger(logOptions))
	opts.EmbeddingServer.FirstStatusWait = firstStatusWait
	if firstStatusWait <= 0 {
		opts.EmbeddingServer.FirstStatusWait = -1 // the option's "none"; its 0 is the default
	}
	var err error
	opts.EmbeddingServer.EndpointCheck, err = controller.ResolveEndpointCheck(endpointCheck, controller.InCluster)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts.EmbeddingServer.EndpointProber, err = controller.EndpointProber(os.Getenv(controller.PodNamespaceEnv), proberLabels)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.Log.Info("endpoint check", "mode", endpointCheck, "enabled", opts.EmbeddingServer.EndpointCheck,
		"admittedByNetworkPolicies", opts.EmbeddingServer.EndpointProber != nil)
	cfg := runtimeclient.GetConfigOrDie(clientOptions)
	if err = controller.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
