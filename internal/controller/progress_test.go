package controller

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/diagnose"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/healthcheck"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

// newTestClock returns a clock stopped at start.
func newTestClock(start time.Time) *testClock {
	return &testClock{now: start}
}

// Now is the clock's time.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// clockedNamespace is a namespace of its own under a controller whose
// progress deadlines are measured with the returned clock.
func clockedNamespace(t *testing.T) (*WithT, string, *testClock) {
	t.Helper()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	clock := newTestClock(time.Now())
	startManager(t, namespace, withClock(clock))
	return g, namespace, clock
}

// withClock measures progress deadlines with clock.
func withClock(clock *testClock) func(*ManagerOptions) {
	return func(opts *ManagerOptions) { opts.EmbeddingServer.Now = clock.Now }
}

// withProgressDeadline sets spec.progressDeadline.
func withProgressDeadline(d time.Duration) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.ProgressDeadline = &metav1.Duration{Duration: d} }
}

// unschedulableMessage is the scheduler's message on a pod waiting for a
// node the cluster autoscaler adds.
const unschedulableMessage = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."

// createUnschedulablePod plays the StatefulSet controller and the
// scheduler: it creates the pod <server>-<ordinal> with the pod template's
// labels, which no node can take yet.
func createUnschedulablePod(t *testing.T, g *WithT, key types.NamespacedName, ordinal string) {
	t.Helper()
	createPodUnschedulableFor(t, g, key, ordinal, unschedulableMessage)
}

// createPodUnschedulableFor creates the pod as createUnschedulablePod does,
// with the scheduler's message.
func createPodUnschedulableFor(t *testing.T, g *WithT, key types.NamespacedName, ordinal, message string) {
	t.Helper()
	sts := waitForStatefulSet(t, g, key)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-" + ordinal, Labels: sts.Spec.Template.Labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "embedding", Image: sts.Spec.Template.Spec.Containers[0].Image,
		}}},
	}
	g.Expect(env.Client.Create(t.Context(), pod)).To(Succeed())
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: message,
		}},
	}
	g.Expect(env.Client.Status().Update(t.Context(), pod)).To(Succeed())
}

// markPodReady plays the scheduler and the kubelet: the pod found a node
// and its TEI container is ready.
func markPodReady(t *testing.T, g *WithT, namespace, name string) {
	t.Helper()
	g.Eventually(func() error {
		pod := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, pod); err != nil {
			return err
		}
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "embedding", Image: pod.Spec.Containers[0].Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}},
		}
		return env.Client.Status().Update(t.Context(), pod)
	}).Should(Succeed())
}

// setStatefulSetReplicas plays the StatefulSet controller: replicas pods
// exist at the update revision, ready of them ready.
func setStatefulSetReplicas(t *testing.T, g *WithT, key types.NamespacedName, replicas, ready int32) {
	t.Helper()
	g.Eventually(func() error {
		sts := &appsv1.StatefulSet{}
		if err := env.Client.Get(t.Context(), key, sts); err != nil {
			return err
		}
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation,
			Replicas:           replicas,
			ReadyReplicas:      ready,
			AvailableReplicas:  ready,
			CurrentReplicas:    replicas,
			UpdatedReplicas:    replicas,
		}
		return env.Client.Status().Update(t.Context(), sts)
	}).Should(Succeed())
}

// expectWaiting waits until the server waits on unschedulable pods as
// progress, then checks that it keeps doing so for as long as Consistently
// polls: Ready=False Unschedulable, Reconciling=True, no Stalled, which the
// GitOps tools read as in progress, and no other Warning event than the
// announced stalls' (the recorder counts a repeated reason on the same
// Event, so stalls is 0 or 1).
func expectWaiting(t *testing.T, g *WithT, key types.NamespacedName, stalls int) {
	t.Helper()
	waiting := func(g Gomega) {
		server := getServer(t, g, key)
		ready := conditions.Get(server, embedopsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.ObservedGeneration).To(Equal(server.Generation))
		g.Expect(ready.Reason).To(Equal(embedopsv1.UnschedulableReason), ready.Message)
		g.Expect(ready.Message).To(ContainSubstring(unschedulableMessage))
		g.Expect(conditions.IsTrue(server, embedopsv1.ReconcilingCondition)).To(BeTrue())
		g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
		g.Expect(server.Status.Phase).To(Equal(embedopsv1.PhaseDegraded))
		g.Expect(server.Status.Progress).NotTo(BeNil())
		g.Expect(warningEvents(t, g, key.Namespace, key.Name, embedopsv1.UnschedulableReason)).To(HaveLen(stalls))
		expectHealth(t, g, server, healthcheck.Progressing, healthcheck.InProgress, "")
	}
	g.Eventually(waiting).Should(Succeed())
	g.Consistently(waiting).Should(Succeed())
	checkConditions(t, g, key)
}

// expectStalled waits until the server is Stalled on unschedulable pods
// past its deadline, with a Warning event of the same reason, which the
// GitOps tools read as failed.
func expectStalled(t *testing.T, g *WithT, key types.NamespacedName, deadline time.Duration) {
	t.Helper()
	server := waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.UnschedulableReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.StalledCondition)).To(And(
		ContainSubstring(strings.TrimSuffix(unschedulableMessage, ".")), HaveSuffix(fmt.Sprintf("; no progress for %s (spec.progressDeadline)", deadline))))
	g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.UnschedulableReason))
	g.Expect(conditions.Has(server, embedopsv1.ReconcilingCondition)).To(BeFalse())
	g.Eventually(func(g Gomega) {
		g.Expect(getServer(t, g, key).Status.Phase).To(Equal(embedopsv1.PhaseFailed))
		g.Expect(warningEvents(t, g, key.Namespace, key.Name, embedopsv1.UnschedulableReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	expectHealth(t, g, server, healthcheck.Degraded, healthcheck.Failed, conditions.GetMessage(server, embedopsv1.StalledCondition))
	checkConditions(t, g, key)
}

func TestUnschedulablePodsAreProgressUntilTheDeadline(t *testing.T) {
	t.Parallel()
	g, namespace, clock := clockedNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2)))
	g.Expect(getServer(t, g, key).Spec.ProgressDeadline).To(Equal(&metav1.Duration{Duration: 10 * time.Minute}), "the CRD's default")
	createUnschedulablePod(t, g, key, "0")
	createUnschedulablePod(t, g, key, "1")
	setStatefulSetReplicas(t, g, key, 2, 0)

	// The cluster autoscaler is adding a node: nothing failed yet.
	expectWaiting(t, g, key, 0)
	clock.Advance(10*time.Minute - time.Second)
	requestReconcile(t, g, key)
	expectWaiting(t, g, key, 0)

	// The deadline passes without progress.
	clock.Advance(2 * time.Second)
	requestReconcile(t, g, key)
	expectStalled(t, g, key, 10*time.Minute)

	// One pod finds a node and becomes ready: progress clears the stall and
	// restarts the clock while the other pod still waits.
	markPodReady(t, g, namespace, "tei-0")
	setStatefulSetReplicas(t, g, key, 2, 1)
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(server.Status.ReadyReplicas).To(Equal(int32(1)))
		g.Expect(server.Status.Progress).NotTo(BeNil())
		g.Expect(server.Status.Progress.LastProgressTime.Time).To(BeTemporally("==", clock.Now().Truncate(time.Second)))
	}).Should(Succeed())
	expectWaiting(t, g, key, 1)
	g.Expect(conditions.GetMessage(getServer(t, g, key), embedopsv1.ReadyCondition)).To(HavePrefix("pod tei-1:"))

	clock.Advance(10*time.Minute + time.Second)
	requestReconcile(t, g, key)
	expectStalled(t, g, key, 10*time.Minute)

	// The last pod becomes ready: the server is Ready and keeps no progress.
	markPodReady(t, g, namespace, "tei-1")
	setStatefulSetReplicas(t, g, key, 2, 2)
	server := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	g.Eventually(func(g Gomega) {
		g.Expect(getServer(t, g, key).Status.Progress).To(BeNil())
	}).Should(Succeed())
}

// A pod that cannot be scheduled until its cache claim binds waits on the
// cache, which CacheReady reports: the server is Initializing (Pending, not
// Degraded) and its first observation is not written again for it; a claim
// that never binds stalls it as Unschedulable once the deadline passes.
func TestAPodWaitingForItsClaimsIsInitializingUntilTheDeadline(t *testing.T) {
	t.Parallel()
	g, namespace, clock := clockedNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	initializing := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	createPodUnschedulableFor(t, g, key, "0", unboundClaimsSchedulerMessage)
	setStatefulSetReplicas(t, g, key, 1, 0)

	waiting := func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(conditions.Get(server, embedopsv1.ReadyCondition)).To(HaveField("Reason", embedopsv1.InitializingReason))
		g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(Equal(conditions.GetMessage(initializing, embedopsv1.ReadyCondition)))
		g.Expect(server.Status.Phase).To(Equal(embedopsv1.PhasePending))
		g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	}
	requestReconcile(t, g, key)
	g.Consistently(waiting).Should(Succeed())

	clock.Advance(10*time.Minute + time.Second)
	requestReconcile(t, g, key)
	server := waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.UnschedulableReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.StalledCondition)).To(And(
		ContainSubstring("pod has unbound immediate PersistentVolumeClaims"), HaveSuffix("; no progress for 10m0s (spec.progressDeadline)")))
	g.Eventually(func(g Gomega) { g.Expect(getServer(t, g, key).Status.Phase).To(Equal(embedopsv1.PhaseFailed)) }).Should(Succeed())
}

func TestProgressDeadlineSurvivesAControllerRestart(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	start := time.Now()
	var key types.NamespacedName
	t.Run("first controller", func(t *testing.T) {
		g := newG(t)
		startManager(t, namespace, withClock(newTestClock(start)))
		key = createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
		createUnschedulablePod(t, g, key, "0")
		expectWaiting(t, g, key, 0)
	})

	// A controller started after the deadline measures from the progress
	// the first one recorded, not from its own start.
	startManager(t, namespace, withClock(newTestClock(start.Add(10*time.Minute+time.Second))))
	expectStalled(t, g, key, 10*time.Minute)
}

func TestTheDeadlineRequeuesAServerNothingElseWakes(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	// Nothing but the deadline's own requeue looks at the server again.
	startManager(t, namespace, func(opts *ManagerOptions) { opts.EmbeddingServer.ProgressInterval = time.Hour })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", withProgressDeadline(3*time.Second)))
	createUnschedulablePod(t, g, key, "0")
	expectStalled(t, g, key, 3*time.Second)
}

func TestNextProgressRestartsTheClockOnProgress(t *testing.T) {
	then := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := then.Add(5*time.Minute + 300*time.Millisecond)
	recorded := &embedopsv1.ServerProgress{LastProgressTime: metav1.NewTime(then), Generation: 2, ReadyReplicas: 1, UpdatedReplicas: 2}
	cases := []struct {
		name             string
		recorded         *embedopsv1.ServerProgress
		generation       int64
		ready, updated   int32
		wantLastProgress time.Time
	}{
		{"no record: the server just left Ready, or is new", nil, 2, 1, 2, now.Truncate(time.Second)},
		{"nothing changed", recorded, 2, 1, 2, then},
		{"a pod stopped being ready", recorded, 2, 0, 2, then},
		{"a pod became ready", recorded, 2, 2, 2, now.Truncate(time.Second)},
		{"a pod was updated", recorded, 2, 1, 3, now.Truncate(time.Second)},
		{"a new generation", recorded, 3, 1, 2, now.Truncate(time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := nextProgress(tc.recorded, tc.generation, tc.ready, tc.updated, now)
			g.Expect(got).To(Equal(&embedopsv1.ServerProgress{
				LastProgressTime: metav1.NewTime(tc.wantLastProgress), Generation: tc.generation, ReadyReplicas: tc.ready, UpdatedReplicas: tc.updated,
			}))
		})
	}
}

func TestWaitingOnIsTheDiagnosisOrTheStallItHolds(t *testing.T) {
	notReady := func(reason string) *metav1.Condition {
		return conditions.FalseCondition(embedopsv1.ReadyCondition, reason, "pod tei-0: %s", reason)
	}
	stalled := func(reason string) *metav1.Condition {
		return conditions.TrueCondition(embedopsv1.StalledCondition, reason, "pod tei-0: %s; no progress for 10m0s (spec.progressDeadline)", reason)
	}
	claimsWait := &diagnose.Diagnosis{Reason: embedopsv1.UnschedulableReason, Message: "pod tei-0: cannot be scheduled: pod has unbound immediate PersistentVolumeClaims."}
	cases := []struct {
		name       string
		server     *embedopsv1.EmbeddingServer
		claimsWait *diagnose.Diagnosis
		want       *diagnose.Diagnosis
	}{
		{"pods starting", withConditions(false, notReady(embedopsv1.InitializingReason)), nil, nil},
		{"a pod waiting for its claims", withConditions(false, notReady(embedopsv1.InitializingReason)), claimsWait,
			&diagnose.Diagnosis{Reason: embedopsv1.UnschedulableReason, Message: "pod tei-0: cannot be scheduled: pod has unbound immediate PersistentVolumeClaims; no progress for 10m0s (spec.progressDeadline)"}},
		{"downloading", withConditions(false, notReady(embedopsv1.DownloadingReason)), nil, nil},
		{"a transient error", withConditions(false, notReady(embedopsv1.ProgressingWithRetryReason)), nil, nil},
		{"a diagnosed pod", withConditions(false, notReady(embedopsv1.UnschedulableReason)), nil,
			&diagnose.Diagnosis{Reason: embedopsv1.UnschedulableReason, Message: "pod tei-0: Unschedulable; no progress for 10m0s (spec.progressDeadline)"}},
		{"a diagnosis that ends a sentence", withConditions(false,
			conditions.FalseCondition(embedopsv1.ReadyCondition, embedopsv1.UnschedulableReason, "pod tei-0: cannot be scheduled: 0/3 nodes are available.")), nil,
			&diagnose.Diagnosis{Reason: embedopsv1.UnschedulableReason, Message: "pod tei-0: cannot be scheduled: 0/3 nodes are available; no progress for 10m0s (spec.progressDeadline)"}},
		{"a crash loop's container briefly running", withConditions(false, notReady(embedopsv1.InitializingReason), stalled(embedopsv1.CrashLoopBackOffReason)), nil,
			&diagnose.Diagnosis{Reason: embedopsv1.CrashLoopBackOffReason, Message: "pod tei-0: CrashLoopBackOff; no progress for 10m0s (spec.progressDeadline)"}},
		{"another diagnosis than the stall's", withConditions(false, notReady(embedopsv1.OOMKilledReason), stalled(embedopsv1.CrashLoopBackOffReason)), nil,
			&diagnose.Diagnosis{Reason: embedopsv1.OOMKilledReason, Message: "pod tei-0: OOMKilled; no progress for 10m0s (spec.progressDeadline)"}},
		{"a stall the deadline did not make", withConditions(false, notReady(embedopsv1.InitializingReason), stalled(embedopsv1.SecretNotFoundReason)), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, found := waitingOn(tc.server, tc.claimsWait, 10*time.Minute)
			if tc.want == nil {
				g.Expect(found).To(BeFalse())
				return
			}
			g.Expect(found).To(BeTrue())
			g.Expect(got).To(Equal(*tc.want))
		})
	}
}

// unboundClaimsSchedulerMessage is kube-scheduler v1.37.2's message on a
// pod whose cache claim the provisioner has not bound yet.
const unboundClaimsSchedulerMessage = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
