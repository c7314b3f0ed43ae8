package bench

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// restServers is how many servers the rest test creates.
const restServers = 3

// restSettle bounds the rest test's waits for the controller's requests to
// settle: a quiet controller settles in seconds, one writing on a timer never.
const restSettle = 30 * time.Second

// restWindow is the rest test's window: several progress intervals, so a
// controller that wrote on a timer would be seen doing it.
const restWindow = 5 * controllerProgressInterval

// TestControllerWritesNothingAtRest checks the figures the benchmark
// reports as zero: once its servers are Ready and bound, the controller
// writes only the acknowledgement of a reconcile request, nothing when an
// owned StatefulSet changes in a way it does not manage, and nothing at
// all over a rest window.
func TestControllerWritesNothingAtRest(t *testing.T) {
	g := NewWithT(t)
	env := sharedEnv(t)
	namespace, err := env.CreateNamespace(t.Context(), "bench-rest-")
	must(t, err)
	must(t, env.CreateServers(t.Context(), namespace, restServers))
	must(t, env.WaitConverged(t.Context(), namespace, restServers, settle))
	converged := settledCount(t, env, namespace)

	must(t, env.Resync(t.Context(), namespace, restServers, "rest", settle))
	resynced := settledCount(t, env, namespace)
	g.Expect(Since(converged, resynced).Writes).To(Equal(map[string]int{statusWrites: restServers}),
		"one acknowledgement per reconcile request, nothing else")

	must(t, env.TouchStatefulSets(t.Context(), namespace, restServers, "rest", settle))
	touched := settledCount(t, env, namespace)
	g.Expect(Since(resynced, touched).Writes).To(BeEmpty(), "a resync through the Owns watch")

	// The window is a measurement, not a wait for state (see doc.go).
	<-time.After(restWindow)
	rested := count(t, env, namespace)
	g.Expect(Since(touched, rested).Writes).To(BeEmpty(), "writes over %s at rest", restWindow)
}

// settledCount waits up to restSettle for the controller's requests about
// namespace to settle and returns them; when they do not, it fails with the
// writes made meanwhile.
func settledCount(t *testing.T, env *Env, namespace string) Counts {
	t.Helper()
	before := count(t, env, namespace)
	counts, err := env.settledCount(t.Context(), namespace, restSettle)
	if err != nil {
		t.Fatalf("%v; the controller's writes meanwhile: %v", err, Since(before, count(t, env, namespace)).Writes)
	}
	return counts
}
