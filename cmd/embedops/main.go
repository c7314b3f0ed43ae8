// Command embedops decides, audits and traces embedops cache decisions.
package main

import (
	"fmt"
	"os"

	"github.com/embedops/embedops/internal/cli"
)

func main() {
	if err := cli.NewRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "embedops:", err)
		os.Exit(cli.ExitCode(err))
	}
}
