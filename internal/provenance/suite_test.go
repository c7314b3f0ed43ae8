package provenance_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/embedops/embedops/test/harness"
)

// env runs with the Flux and Argo CD CRDs installed.
var env *harness.Env

func TestMain(m *testing.M) {
	crds, err := harness.ThirdPartyCRDPaths()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(harness.RunWithEnv(m, &env, harness.EnvOptions{ExtraCRDPaths: crds}))
}
