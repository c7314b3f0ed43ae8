package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// NewRootCommand returns the embedops command with its subcommands.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "embedops",
		Short:         "Inspect and audit embedops cache decisions",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newDecideCommand(), newPopulateCommand(), newAuditCommand(), newTraceCommand(), newCleanupCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the embedops version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			version := "(devel)"
			if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
				version = info.Main.Version
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "embedops", version)
			return err
		},
	}
}
