package docs

import (
	"fmt"
	"path"
	"strings"

	"github.com/spf13/cobra"
)

// command checks an embedops command line: each word before the first
// flag or argument names a subcommand, and each flag is one of the last
// subcommand's (its own, or inherited).
func (r *Repo) command(args []string) string {
	cmd := r.cli
	for _, arg := range args {
		arg = strings.Trim(arg, "[]")
		switch {
		case strings.HasPrefix(arg, "-"):
			name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if !hasFlag(cmd, name) {
				return fmt.Sprintf("`%s` has no flag %s", cmd.CommandPath(), arg)
			}
		case cmd == r.cli:
			sub := subcommand(cmd, arg)
			if sub == nil {
				return fmt.Sprintf("embedops has no command %q (internal/cli.NewRootCommand)", arg)
			}
			cmd = sub
		default:
			if sub := subcommand(cmd, arg); sub != nil {
				cmd = sub
			}
		}
	}
	return ""
}

// subcommand is cmd's subcommand called name, or nil.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// hasFlag tells whether cmd takes the flag, by name or shorthand.
func hasFlag(cmd *cobra.Command, name string) bool {
	if cmd.Flag(name) != nil {
		return true
	}
	return len(name) == 1 && (cmd.Flags().ShorthandLookup(name) != nil || cmd.InheritedFlags().ShorthandLookup(name) != nil)
}

// make checks that each target of a make command line is the Makefile's;
// the first VAR=value argument starts the settings, which may be quoted
// and hold spaces.
func (r *Repo) make(args []string) string {
	for _, arg := range args {
		if strings.Contains(arg, "=") {
			return ""
		}
		if !r.makeTargets[arg] {
			return fmt.Sprintf("the Makefile has no target %q", arg)
		}
	}
	return ""
}

// goCommand checks the package paths of a go command line.
func (r *Repo) goCommand(args []string) string {
	for _, arg := range args {
		if !strings.HasPrefix(arg, "./") {
			continue
		}
		dir := strings.TrimSuffix(strings.TrimSuffix(arg, "..."), "/")
		if dir = path.Clean(dir); !r.files[dir] && dir != "." {
			return fmt.Sprintf("no package %s in the tree", arg)
		}
	}
	return ""
}
