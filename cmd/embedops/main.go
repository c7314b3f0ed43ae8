// Command embedops decides, audits and traces embedops cache decisions. Built
// or linked as kubectl-embedops, it is the kubectl plugin `kubectl embedops`.
package main

import (
	"fmt"
	"os"

	"github.com/embedops/embedops/internal/cli"
)

func main() {
	if err := cli.NewRootCommandAs(os.Args[0]).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "embedops:", err)
		os.Exit(cli.ExitCode(err))
	}
}
