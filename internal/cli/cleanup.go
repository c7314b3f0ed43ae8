package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/embedops/embedops/internal/cleanup"
)

// cleanupOptions are the flags of `embedops cleanup`.
type cleanupOptions struct {
	kube           kubeOptions
	leaseNamespace string
	force          bool
}

func newCleanupCommand() *cobra.Command {
	opts := cleanupOptions{}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Prepare an uninstall: delete ModelCacheBindings and release embedops finalizers",
		Long: "cleanup deletes every ModelCacheBinding (claims are orphaned, never deleted: their data stays)\n" +
			"and removes embedops' finalizers from bindings and EmbeddingServers, so deleting the CRDs or\n" +
			"namespaces afterwards cannot hang. It covers every namespace unless -n names one, and refuses\n" +
			"while a controller holds the leader lease.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCleanup(cmd.Context(), cmd.OutOrStdout(), opts)
		},
	}
	opts.kube.bind(cmd)
	cmd.Flags().StringVar(&opts.leaseNamespace, "controller-namespace", cleanup.DefaultControllerNamespace, "namespace of the controller's leader lease")
	cmd.Flags().BoolVar(&opts.force, "force", false, "clean up even while a controller holds the leader lease")
	return cmd
}

func runCleanup(ctx context.Context, out io.Writer, opts cleanupOptions) error {
	// An uninstall covers every namespace unless -n says otherwise.
	opts.kube.allNamespaces = opts.kube.allNamespaces || opts.kube.namespace == ""
	c, namespace, err := opts.kube.client()
	if err != nil {
		return err
	}
	report, err := cleanup.Run(ctx, c, cleanup.Options{
		Namespace: namespace, LeaseNamespace: opts.leaseNamespace, Force: opts.force,
	})
	for _, name := range report.BindingsDeleted {
		fmt.Fprintf(out, "modelcachebinding/%s deleted\n", name)
	}
	for _, name := range report.ClaimsOrphaned {
		fmt.Fprintf(out, "persistentvolumeclaim/%s kept (orphaned, data intact)\n", name)
	}
	for _, name := range report.ServersReleased {
		fmt.Fprintf(out, "embeddingserver/%s finalizer removed\n", name)
	}
	return err
}
