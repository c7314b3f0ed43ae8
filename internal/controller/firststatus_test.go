package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// startingScope is the scope of a reconcile of a server whose status was
// never written, whose StatefulSet was created at created and whose pods
// are starting: everything the first status would say is progress.
func startingScope(created time.Time) *serverScope {
	server := fixtures.EmbeddingServer("models", "tei")
	server.Status.ObservedGeneration = -1
	patcher := &serverPatcher{before: server.DeepCopy()}
	conditions.MarkTrue(server, embedopsv1.AcceptedCondition, embedopsv1.ValidReason, "valid")
	conditions.MarkFalse(server, embedopsv1.CacheReadyCondition, embedopsv1.PendingReason, "0/1 claims bound")
	conditions.MarkFalse(server, embedopsv1.SourceResolvedCondition, embedopsv1.SourceUnknownReason, "no source")
	conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.InitializingReason, "0/1 replicas ready")
	conditions.MarkReconciling(server, embedopsv1.ProgressingReason, "0/1 replicas ready")
	server.Status.Inventory = &embedopsv1.ResourceInventory{Entries: expectedChildren(server)}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "tei", CreationTimestamp: metav1.NewTime(created)}}
	return &serverScope{server: server, patcher: patcher, unwritten: true, statefulSet: sts}
}

func TestFirstStatusWaitsOnlyWhileThereIsNothingButProgress(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	r := &EmbeddingServerReconciler{firstStatusWait: time.Minute, now: func() time.Time { return now }}
	cases := []struct {
		name   string
		change func(*serverScope)
		err    error
		left   time.Duration
	}{
		{name: "pods starting", left: 50 * time.Second},
		{name: "downloading", left: 50 * time.Second, change: func(s *serverScope) {
			conditions.MarkFalse(s.server, embedopsv1.ReadyCondition, embedopsv1.DownloadingReason, "downloading")
			conditions.MarkFalse(s.server, embedopsv1.ModelReadyCondition, embedopsv1.DownloadingReason, "downloading")
		}},
		{name: "halted before readiness: no StatefulSet read", left: 50 * time.Second, change: func(s *serverScope) {
			s.statefulSet = nil
			s.server.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
		}},
		{name: "the status was written before", change: func(s *serverScope) { s.unwritten = false }},
		{name: "Ready", change: func(s *serverScope) {
			conditions.MarkTrue(s.server, embedopsv1.ReadyCondition, embedopsv1.AvailableReason, "1/1 replicas ready")
		}},
		{name: "a diagnosed wait", change: func(s *serverScope) {
			conditions.MarkFalse(s.server, embedopsv1.ReadyCondition, embedopsv1.UnschedulableReason, "no node")
		}},
		{name: "a source that does not resolve", change: func(s *serverScope) {
			conditions.MarkFalse(s.server, embedopsv1.SourceResolvedCondition, embedopsv1.InvalidRevisionReason, "bad")
		}},
		{name: "stalled", change: func(s *serverScope) { s.stalled = true }},
		{name: "a failed reconcile", err: errors.New("transient")},
		{name: "a reconcile request to acknowledge", change: func(s *serverScope) {
			s.server.Status.SetLastHandledReconcileRequest("now")
		}},
		{name: "a child that may be pruned", change: func(s *serverScope) {
			s.server.Status.Inventory.Entries = append(s.server.Status.Inventory.Entries,
				inventoryRef("models", "tei", appsv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")))
		}},
		{name: "the wait is over", left: -50 * time.Second, change: func(s *serverScope) {
			s.statefulSet.CreationTimestamp = metav1.NewTime(now.Add(-110 * time.Second))
		}},
		{name: "a progress deadline shorter than the wait", left: -5 * time.Second, change: func(s *serverScope) {
			s.server.Spec.ProgressDeadline = &metav1.Duration{Duration: 5 * time.Second}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scope := startingScope(now.Add(-10 * time.Second))
			if c.change != nil {
				c.change(scope)
			}
			NewWithT(t).Expect(r.firstStatusLeft(scope, c.err)).To(Equal(c.left))
		})
	}
	NewWithT(t).Expect((&EmbeddingServerReconciler{now: r.now}).firstStatusLeft(startingScope(now), nil)).To(BeZero(), "no wait configured")
}

// A server not Ready within the wait has its progress written when the wait
// ends, with no event to bring it back: the reconcile asked for it.
func TestANewServerNotReadyWithinTheWaitHasItsProgressWrittenThen(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	const wait = 3 * time.Second
	requests := startManager(t, namespace, func(o *ManagerOptions) {
		o.EmbeddingServer.FirstStatusWait = wait
		o.EmbeddingServer.ProgressInterval = time.Hour
	})
	before := requests.requestSnapshot()
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	sts := waitForStatefulSet(t, g, key)

	server := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
	written := conditions.Get(server, embedopsv1.ReadyCondition).LastTransitionTime.Time
	// Times are stored to the second.
	g.Expect(written.Sub(sts.CreationTimestamp.Time)).To(BeNumerically(">=", wait-time.Second),
		"the progress was written %s after the StatefulSet was created", written.Sub(sts.CreationTimestamp.Time))
	g.Expect(requests.requestsSince(before)).To(HaveKeyWithValue("PATCH embeddingservers/status", 1))
}

// A stall is written at once, whatever the wait.
func TestANewServersStallIsWrittenAtOnce(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, func(o *ManagerOptions) { o.EmbeddingServer.FirstStatusWait = time.Hour })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithToken("missing", "token")))
	waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.SecretNotFoundReason)
}

// A retainFor edit before the server's first status, which would name the
// binding in use, still hands the storage over: the ledger finds the
// binding the server created and references.
func TestRetainForChangeBeforeTheFirstStatusKeepsTheStorage(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, func(o *ManagerOptions) { o.EmbeddingServer.FirstStatusWait = time.Hour })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithRetainFor(time.Second),
		declaredAt(strings.Repeat("a", 40))))
	sts := waitForStatefulSet(t, g, key)
	server := getServer(t, g, key)
	old := createdBinding(t, g, server)
	g.Expect(getServer(t, g, key).StatusWritten()).To(BeFalse(), "the server's status waits for Ready")

	updateServer(t, g, key, fixtures.WithRetainFor(3*time.Second), declaredAt(strings.Repeat("b", 40)))
	var successorName string
	g.Eventually(func(g Gomega) {
		successorName = getBinding(t, g, namespace, old.Name).Status.SupersededBy
		g.Expect(successorName).NotTo(BeEmpty(), "the old binding is not handed over")
	}).Should(Succeed())
	waitForSuperseded(t, g, namespace, old.Name, successorName)
	successor := getBinding(t, g, namespace, successorName)
	g.Expect(successor.Spec.Supersedes).To(Equal(old.Name))
	g.Expect(successor.Spec.Resources.StorageName).To(Equal(old.Name))
	expectSameStatefulSet(t, g, sts)
}

// createdBinding waits for the one binding the server created to hold its
// reference, and returns it.
func createdBinding(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var binding embedopsv1.ModelCacheBinding
	g.Eventually(func(g Gomega) {
		var created embedopsv1.ModelCacheBindingList
		g.Expect(env.Client.List(t.Context(), &created, client.InNamespace(server.Namespace),
			client.MatchingLabels{embedopsv1.ServerUIDLabel: string(server.UID)})).To(Succeed())
		g.Expect(created.Items).To(HaveLen(1))
		binding = created.Items[0]
		g.Expect(binding.Status.RequestReferences).To(ContainElement(HaveField("UID", server.UID)))
	}).Should(Succeed())
	return &binding
}
