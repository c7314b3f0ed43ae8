package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// servedCommit is the model commit the stand-in TEI reports by default.
const servedCommit = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"

// teiStandIn plays TEI's /info on 127.0.0.1 for every Service address the
// controller dials.
type teiStandIn struct {
	server *httptest.Server

	mu     sync.Mutex
	status int
	sha    string
	hosts  map[string]bool
}

// newTEIStandIn starts a stand-in answering 200 with servedCommit until the
// test ends.
func newTEIStandIn(t *testing.T) *teiStandIn {
	t.Helper()
	s := &teiStandIn{status: http.StatusOK, sha: servedCommit, hosts: map[string]bool{}}
	s.server = httptest.NewServer(http.HandlerFunc(s.serveInfo))
	t.Cleanup(s.server.Close)
	return s
}

func (s *teiStandIn) serveInfo(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status, sha := s.status, s.sha
	s.hosts[r.Host+r.URL.Path] = true
	s.mu.Unlock()
	if r.URL.Path != "/info" {
		http.NotFound(w, r)
		return
	}
	w.WriteHeader(status)
	if status == http.StatusOK {
		_, _ = fmt.Fprintf(w, `{"model_id":"BAAI/bge-small-en-v1.5","model_sha":%q,"model_dtype":"float32","max_input_length":512,"version":"1.9.0"}`, sha)
	}
}

// answer makes /info answer with the HTTP status and model commit.
func (s *teiStandIn) answer(status int, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.sha = status, sha
}

// asked is true when /info was asked at the host:port and path.
func (s *teiStandIn) asked(hostPath string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosts[hostPath]
}

// withEndpointCheck turns the check on, every dial reaching standIn.
func withEndpointCheck(standIn *teiStandIn) func(*ManagerOptions) {
	return func(opts *ManagerOptions) {
		opts.EmbeddingServer.EndpointCheck = true
		opts.EmbeddingServer.EndpointClient = NewEndpointClient(dialTo(standIn.server.Listener.Addr().String()))
		opts.EmbeddingServer.EndpointInterval = 200 * time.Millisecond
	}
}

func TestServerEndpointCheckRecordsWhatTEIServes(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, withEndpointCheck(standIn))
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)

	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	server := waitForPhase(t, g, key, embedopsv1.PhaseReady)
	g.Expect(server.Status.EndpointCheck).To(Equal(embedopsv1.EndpointCheckEnabled))
	g.Expect(server.Status.Served).To(Equal(&embedopsv1.ServedModel{
		ModelID: "BAAI/bge-small-en-v1.5", ModelSHA: servedCommit, DType: "float32", MaxInputLength: 512,
	}))
	g.Expect(standIn.asked("tei." + namespace + ".svc:8080/info")).To(BeTrue())
	checkConditions(t, g, key)

	// The pods stay ready but TEI stops answering.
	standIn.answer(http.StatusServiceUnavailable, servedCommit)
	server = waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.EndpointUnavailableReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring("503"))
	server = waitForPhase(t, g, key, embedopsv1.PhaseDegraded)
	g.Expect(conditions.IsTrue(server, embedopsv1.ReconcilingCondition)).To(BeTrue())
	g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	g.Expect(server.Status.Served).NotTo(BeNil(), "the last answer is kept")
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.EndpointUnavailableReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	checkConditions(t, g, key)

	standIn.answer(http.StatusOK, servedCommit)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	server = waitForPhase(t, g, key, embedopsv1.PhaseReady)
	g.Expect(conditions.Has(server, embedopsv1.ReconcilingCondition)).To(BeFalse())
	checkConditions(t, g, key)
}

func TestServerEndpointCheckWarnsOnceOfAnotherServedRevision(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, withEndpointCheck(standIn))
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)
	server := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())

	// The binding recorded another commit than TEI serves.
	const recorded = "0123456789abcdef0123456789abcdef01234567"
	g.Eventually(func() error {
		binding := &embedopsv1.ModelCacheBinding{}
		if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: server.Status.CacheBinding}, binding); err != nil {
			return err
		}
		patch := client.MergeFrom(binding.DeepCopy())
		binding.Status.Realized = &embedopsv1.RealizedCache{ResolvedCommit: recorded}
		return env.Client.Status().Patch(t.Context(), binding, patch)
	}).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedRevisionMismatchReason)).To(HaveLen(1))
	}).Should(Succeed())
	server = waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring(recorded))
	// Rechecks find the same mismatch and stay quiet.
	requestReconcile(t, g, key)
	requestReconcile(t, g, key)
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedRevisionMismatchReason)).To(HaveLen(1))
	g.Expect(getServer(t, g, key).Status.Phase).To(Equal(embedopsv1.PhaseReady))
	checkConditions(t, g, key)
}

func TestServerEndpointCheckOffRecordsNothingServed(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, func(opts *ManagerOptions) {
		opts.EmbeddingServer.EndpointClient = NewEndpointClient(dialTo(standIn.server.Listener.Addr().String()))
	})
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)

	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	server := requestReconcile(t, g, key)
	g.Expect(server.Status.Phase).To(Equal(embedopsv1.PhaseReady))
	g.Expect(server.Status.EndpointCheck).To(Equal(embedopsv1.EndpointCheckDisabled))
	g.Expect(server.Status.Served).To(BeNil())
	g.Expect(standIn.asked("tei." + namespace + ".svc:8080/info")).To(BeFalse())
	checkConditions(t, g, key)
}
