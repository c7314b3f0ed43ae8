// Command baseline builds the previous release's controller, the commit
// test/upgrade/BASELINE names, into bin/upgrade/controller-<commit> unless
// it is there already (make tools runs it; the upgrade test builds it too).
package main

import (
	"fmt"
	"os"

	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/upgrade"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	commit, err := upgrade.ReadBaselineFile(root)
	if err != nil {
		return err
	}
	baseline, err := upgrade.OpenBaseline(root, commit)
	if err != nil {
		return err
	}
	binary, err := baseline.Controller(root)
	if err != nil {
		return err
	}
	fmt.Println(binary)
	return nil
}
