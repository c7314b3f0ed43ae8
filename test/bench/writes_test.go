package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// idleResyncs is how many reconcile requests each idle server gets.
const idleResyncs = 100

// controllerProgressInterval is how often the benchmarked controller looks again at a
// server whose pods are not ready.
const controllerProgressInterval = 2 * time.Second

// settle bounds each wait on the cluster.
const settle = 5 * time.Minute

// BenchmarkServerWrites creates b.N servers on the local cluster, waits for
// each to be Ready and bound, then asks for 100 reconciles of every idle
// server, and reports the controller's requests as the API server's audit
// log saw them.
func BenchmarkServerWrites(b *testing.B) {
	env := sharedEnv(b)
	namespace, err := env.CreateNamespace(b.Context(), "bench-writes-")
	must(b, err)
	before := count(b, env, namespace)

	b.ResetTimer()
	must(b, env.CreateServers(b.Context(), namespace, b.N))
	must(b, env.WaitConverged(b.Context(), namespace, b.N, settle))
	b.StopTimer()
	afterCreate, err := env.settledCount(b.Context(), namespace, settle)
	must(b, err)
	created := Since(before, afterCreate)

	for round := range idleResyncs {
		must(b, env.Resync(b.Context(), namespace, b.N, fmt.Sprint(round), settle))
	}
	resynced := Since(afterCreate, count(b, env, namespace))

	perServer := func(n int) float64 { return float64(n) / float64(b.N) }
	statusWrites := resynced.Writes[statusWrites]
	b.ReportMetric(perServer(Total(created.Writes)), "writes/create")
	b.ReportMetric(perServer(Total(created.Requests)), "requests/create")
	b.ReportMetric(perServer(Total(resynced.Writes)-statusWrites), "child-writes/100-resyncs")
	b.ReportMetric(perServer(statusWrites), "status-writes/100-resyncs")
	if childWrites := Total(resynced.Writes) - statusWrites; childWrites != 0 {
		b.Errorf("reconcile requests wrote more than their acknowledgements: %v", resynced.Writes)
	}
	b.Logf("servers %d; writes while creating: %v; writes across %d reconcile requests each: %v",
		b.N, created.Writes, idleResyncs, resynced.Writes)
}

// sharedEnv starts, once per process and only when a benchmark needs it,
// the benchmark environment, with the controller as its own process
// checking progress every 2s. TestMain stops it.
func sharedEnv(b testing.TB) *Env {
	b.Helper()
	shared.once.Do(func() {
		shared.env, shared.err = StartEnv(context.Background(), EnvOptions{ControllerArgs: []string{"--progress-interval=" + controllerProgressInterval.String()}})
	})
	must(b, shared.err)
	return shared.env
}

var shared struct {
	once sync.Once
	env  *Env
	err  error
}

func TestMain(m *testing.M) {
	// The harness's clients log through controller-runtime, which would
	// otherwise print a stack trace asking for a logger.
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// count counts the controller's requests about objects in namespace: runs
// share the cluster, and a previous run's teardown must not be counted.
func count(b testing.TB, env *Env, namespace string) Counts {
	b.Helper()
	counts, err := env.Count(namespace)
	must(b, err)
	return counts
}

func must(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
