package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by the linker (`make build`):
//
//	-X github.com/embedops/embedops/internal/cli.version=<git describe>
//	-X github.com/embedops/embedops/internal/cli.commit=<commit>
var version, commit string

// versionInfo is what `embedops version` prints.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// buildVersion is the stamped version and commit, else what the Go
// toolchain recorded: the module version ("(devel)" for a local build) and
// the VCS revision (`go build` stamps vcs.revision in a git checkout), with
// "-dirty" when the tree had changes.
func buildVersion() versionInfo {
	info := versionInfo{Version: version, Commit: commit}
	build, ok := debug.ReadBuildInfo()
	if !ok {
		return fill(info)
	}
	if info.Version == "" {
		info.Version = build.Main.Version
	}
	if info.Commit == "" {
		info.Commit = vcsRevision(build.Settings)
	}
	return fill(info)
}

// vcsRevision is the vcs.revision setting, marked dirty per vcs.modified.
func vcsRevision(settings []debug.BuildSetting) string {
	revision, modified := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision != "" && modified {
		revision += "-dirty"
	}
	return revision
}

// fill names what is unknown.
func fill(info versionInfo) versionInfo {
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the embedops version and the commit it was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildVersion()
			if output == outputTable {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "embedops %s (commit %s)\n", info.Version, info.Commit)
				return err
			}
			if output != outputJSON && output != outputYAML {
				return usageErrorf("unknown output format %q: use table, json or yaml", output)
			}
			return printStructured(cmd.OutOrStdout(), output, info)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table, json or yaml")
	return cmd
}
