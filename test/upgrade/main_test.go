package upgrade

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/embedops/embedops/test/harness"
)

// crdDir holds embedops' CRDs in the repository, at every release.
const crdDir = "config/crd/bases"

// baselineFlag replaces BASELINE's commit for one run, e.g. to try an
// upgrade from an older release: go test ./test/upgrade -args -upgrade.baseline=<commit>.
var baselineFlag = flag.String("upgrade.baseline", "", "the commit to upgrade from; empty means the one "+BaselineFile+" names")

// env runs with the baseline's CRDs; the test installs the working tree's
// over them. baseline is the previous release.
var (
	env      *harness.Env
	baseline *Baseline
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The controllers are processes of their own with their own logs;
	// envtest's CRD installer logs through controller-runtime.
	ctrl.SetLogger(logr.Discard())
	os.Exit(run(m))
}

// run reads the baseline, writes its CRDs into a temporary directory and
// runs the tests on a control plane that starts with them.
func run(m *testing.M) int {
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	commit := *baselineFlag
	if commit == "" {
		if commit, err = ReadBaselineFile(root); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if baseline, err = OpenBaseline(root, commit); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	crds, err := os.MkdirTemp("", "embedops-baseline-crds-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(crds) }()
	if err := baseline.WriteTree(crdDir, crds); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return harness.RunWithEnv(m, &env, harness.EnvOptions{CRDPaths: []string{crds}})
}
