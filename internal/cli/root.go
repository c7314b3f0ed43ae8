package cli

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// kubectlPluginPrefix starts the name kubectl finds a plugin by on PATH
// (kubectl's plugin mechanism: `kubectl embedops` runs kubectl-embedops).
const kubectlPluginPrefix = "kubectl-"

// NewRootCommand returns the embedops command with its subcommands.
func NewRootCommand() *cobra.Command { return NewRootCommandAs("embedops") }

// NewRootCommandAs is NewRootCommand as the program named by argv0 presents
// itself: `kubectl embedops` when it runs as the kubectl plugin.
func NewRootCommandAs(argv0 string) *cobra.Command {
	root := &cobra.Command{
		Use:           "embedops",
		Short:         "Inspect and audit embedops cache decisions",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if strings.HasPrefix(filepath.Base(argv0), kubectlPluginPrefix+"embedops") {
		// cobra prints this name in usage and completion scripts.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl embedops"}
	}
	root.AddCommand(newVersionCommand(), newDecideCommand(), newDiffCommand(), newPopulateCommand(), newAuditCommand(), newTraceCommand(), newCleanupCommand())
	return root
}
