package metrics

import (
	"os"
	"testing"

	"github.com/embedops/embedops/test/harness"
)

// env is the control plane of this package's test.
var env *harness.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithEnv(m, &env, harness.EnvOptions{}))
}
