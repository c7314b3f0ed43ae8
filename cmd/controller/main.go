// Command controller runs embedops' controller manager.
package main

import (
	"fmt"
	"os"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/logger"
	flag "github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/embedops/embedops/internal/controller"
)

func main() {
	var (
		opts          controller.ManagerOptions
		clientOptions runtimeclient.Options
		logOptions    logger.Options
	)
	flag.StringVar(&opts.MetricsAddr, "metrics-addr", ":8080", "The address the metrics endpoint binds to.")
	flag.StringVar(&opts.HealthAddr, "health-addr", ":9440", "The address the health endpoint binds to.")
	flag.IntVar(&opts.EmbeddingServer.MaxConcurrentReconciles, "concurrent", 4, "The number of EmbeddingServers reconciled at once.")
	flag.DurationVar(&opts.EmbeddingServer.ProgressInterval, "progress-interval", controller.DefaultProgressInterval,
		"How often a server whose pods are not ready is checked again when no event arrives.")
	opts.LeaderElection.BindFlags(flag.CommandLine)
	clientOptions.BindFlags(flag.CommandLine)
	logOptions.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(logger.NewLogger(logOptions))
	cfg := runtimeclient.GetConfigOrDie(clientOptions)
	if err := controller.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
