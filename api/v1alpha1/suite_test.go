package v1alpha1_test

import (
	"os"
	"testing"

	"github.com/embedops/embedops/test/harness"
)

// env is the envtest control plane shared by this package's tests; each test
// works in a namespace of its own.
var env *harness.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithEnv(m, &env, harness.EnvOptions{}))
}
