// Command controller runs embedops' controller manager: it reads its flags
// into controller.ManagerOptions (flags.go), checks them, and hands them to
// controller.Run.
package main

import (
	goflag "flag"
	"fmt"
	"os"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/logger"
	flag "github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/internal/controller/endpoint"
)

func main() {
	flags := bindFlags(flag.CommandLine)
	// controller-runtime registers --kubeconfig on the Go flag set.
	flag.CommandLine.AddGoFlagSet(goflag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(logger.NewLogger(flags.log))
	opts, err := flags.managerOptions(os.Getenv(endpoint.PodNamespaceEnv), endpoint.InCluster)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.Log.Info("endpoint check", "mode", flags.endpointCheck, "enabled", opts.EmbeddingServer.EndpointCheck,
		"admittedByNetworkPolicies", opts.EmbeddingServer.EndpointProber != nil)
	cfg := runtimeclient.GetConfigOrDie(flags.client)
	if err := controller.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
