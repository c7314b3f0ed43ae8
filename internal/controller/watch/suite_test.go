package watch

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/test/harness"
)

// env is the envtest control plane of TestCacheHoldsOnlyLabelledTrimmedPods,
// which reads the cache that CacheOptions shapes from a real API server.
var env *harness.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithEnv(m, &env, harness.EnvOptions{}))
}

// newG returns a Gomega for t that waits up to 30 s, as envtest answers in
// milliseconds.
func newG(t *testing.T) *WithT {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	return g
}
