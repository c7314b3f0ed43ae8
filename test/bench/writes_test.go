package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// controllerAgent is the user agent the benchmarked controller sends, so
// its requests can be told apart in the audit log.
const controllerAgent = "embedops-bench-controller"

// idleResyncs is how many reconcile requests each idle server gets.
const idleResyncs = 100

// settle bounds each wait on the cluster.
const settle = 5 * time.Minute

// BenchmarkServerWrites creates b.N servers on the local cluster, waits for
// each to be Ready, then asks for 100 reconciles of every idle server, and
// reports the controller's requests as the API server's audit log saw them.
func BenchmarkServerWrites(b *testing.B) {
	cluster := sharedCluster(b)
	namespace := cluster.Namespace(b)
	servers := make([]client.ObjectKey, 0, b.N)
	before := count(b, cluster, namespace)

	b.ResetTimer()
	for i := range b.N {
		server := &embedopsv1.EmbeddingServer{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: namespace},
			Spec:       embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"}},
		}
		must(b, cluster.Client.Create(b.Context(), server))
		servers = append(servers, client.ObjectKeyFromObject(server))
	}
	for _, key := range servers {
		waitFor(b, cluster.Client, key, isAvailable)
	}
	b.StopTimer()
	afterCreate := count(b, cluster, namespace)
	created := Since(before, afterCreate)

	for round := range idleResyncs {
		token := fmt.Sprint(round)
		for _, key := range servers {
			requestReconcile(b, cluster.Client, key, token)
		}
		for _, key := range servers {
			waitFor(b, cluster.Client, key, handled(token))
		}
	}
	resynced := Since(afterCreate, count(b, cluster, namespace))

	perServer := func(n int) float64 { return float64(n) / float64(b.N) }
	statusWrites := resynced.Writes["embeddingservers/status"]
	b.ReportMetric(perServer(Total(created.Writes)), "writes/create")
	b.ReportMetric(perServer(Total(created.Requests)), "requests/create")
	b.ReportMetric(perServer(Total(resynced.Writes)-statusWrites), "child-writes/100-resyncs")
	b.ReportMetric(perServer(statusWrites), "status-writes/100-resyncs")
	b.Logf("servers %d; writes while creating: %v; writes across %d reconcile requests each: %v",
		b.N, created.Writes, idleResyncs, resynced.Writes)
}

// sharedCluster starts, once per process and only when a benchmark needs
// it, the local cluster with an audit log, the CRDs and the controller
// with its own user agent. TestMain stops it.
func sharedCluster(b *testing.B) *harness.Cluster {
	b.Helper()
	shared.once.Do(func() { shared.cluster, shared.stop, shared.err = startAuditedCluster() })
	must(b, shared.err)
	return shared.cluster
}

var shared struct {
	once    sync.Once
	cluster *harness.Cluster
	stop    func()
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	os.Exit(code)
}

func startAuditedCluster() (*harness.Cluster, func(), error) {
	dir, err := os.MkdirTemp("", "embedops-bench-")
	if err != nil {
		return nil, nil, err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy), 0o600); err != nil {
		return nil, nil, err
	}
	cluster, err := harness.StartCluster(context.Background(), harness.ClusterOptions{AuditPolicy: policy})
	if err != nil {
		return nil, nil, err
	}
	stopAll := func(stopController func()) func() {
		return func() {
			if stopController != nil {
				stopController()
			}
			if err := cluster.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			_ = os.RemoveAll(dir)
		}
	}
	if err := operator.InstallCRDs(cluster.Config); err != nil {
		stopAll(nil)()
		return nil, nil, err
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.UserAgent = controllerAgent
	opts := controller.ManagerOptions{MetricsAddr: "0", HealthAddr: "0"}
	opts.EmbeddingServer.ProgressInterval = 2 * time.Second
	stopController, err := operator.Run(cfg, opts)
	if err != nil {
		stopAll(nil)()
		return nil, nil, err
	}
	return cluster, stopAll(stopController), nil
}

// count counts the controller's requests about objects in namespace: runs
// share the cluster, and a previous run's teardown must not be counted.
func count(b *testing.B, cluster *harness.Cluster, namespace string) Counts {
	b.Helper()
	counts, err := CountRequests(cluster.AuditLogPath(), controllerAgent, namespace)
	must(b, err)
	return counts
}

// isAvailable checks Ready=True/Available for the current generation.
func isAvailable(server *embedopsv1.EmbeddingServer) bool {
	return server.Status.ObservedGeneration == server.Generation &&
		conditions.IsTrue(server, embedopsv1.ReadyCondition) &&
		conditions.GetReason(server, embedopsv1.ReadyCondition) == embedopsv1.AvailableReason
}

// handled checks that the controller answered a reconcile request.
func handled(token string) func(*embedopsv1.EmbeddingServer) bool {
	return func(server *embedopsv1.EmbeddingServer) bool {
		return server.Status.LastHandledReconcileAt == token
	}
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt, as `flux reconcile` does.
func requestReconcile(b *testing.B, c client.Client, key client.ObjectKey, token string) {
	b.Helper()
	server := &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, token))
	must(b, c.Patch(b.Context(), server, client.RawPatch("application/merge-patch+json", patch)))
}

// waitFor polls a server until done holds or settle passes.
func waitFor(b *testing.B, c client.Client, key client.ObjectKey, done func(*embedopsv1.EmbeddingServer) bool) {
	b.Helper()
	err := wait.PollUntilContextTimeout(b.Context(), 100*time.Millisecond, settle, true, func(ctx context.Context) (bool, error) {
		server := &embedopsv1.EmbeddingServer{}
		return c.Get(ctx, key, server) == nil && done(server), nil
	})
	if err != nil {
		b.Fatalf("server %s did not get there within %s: %v", key, settle, err)
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
