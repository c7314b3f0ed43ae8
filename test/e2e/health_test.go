package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/healthcheck"
)

// healthState is a state the controller reports, how Argo CD's health Lua
// and Flux's healthCheckExprs must read it, and the Argo CD test case
// (config/argocd testdata) recorded from it, if any.
type healthState struct {
	name string
	// options make the server; change, when set, is applied once it is Ready.
	options []fixtures.Option
	change  func(*embedopsv1.EmbeddingServer)
	// ready and reason are the Ready condition the state settles on, and
	// message its message when the fixture records it.
	ready   metav1.ConditionStatus
	reason  string
	message string
	// stalled: the state is Stalled=True with reason, which Ready=False
	// with that reason precedes while pods wait before the deadline.
	stalled bool
	argo    string
	flux    string
	fixture string
}

// recordedServer is the name of every server in these tests, so recorded
// messages name the same pod whatever the namespace.
const recordedServer = "minilm"

// crashMessage is the kubelet's back-off message given to crashing pods,
// without the pod UID kwok would put in it.
const crashMessage = "back-off 40s restarting failed container=embedding pod=" + recordedServer + "-0"

// missingImage is an image reference, without a registry, that kwok
// reports as failing to pull.
const missingImage = "text-embeddings-inference:missing"

// simulating is a pod template option asking kwok for a pod state, with
// the annotation patch built by simulated.
func simulating(state string, annotations map[string]string) fixtures.Option {
	patch := simulated(state)
	for k, v := range annotations {
		patch["metadata"].(map[string]any)["annotations"].(map[string]any)[k] = v
	}
	return fixtures.WithPodTemplate(patch)
}

// shortDeadline is the progress deadline of the states recorded past it.
const shortDeadline = 5 * time.Second

// pastDeadline gives a server a progress deadline of shortDeadline.
func pastDeadline(s *embedopsv1.EmbeddingServer) {
	s.Spec.ProgressDeadline = &metav1.Duration{Duration: shortDeadline}
}

// healthStates are the states of a server on the local cluster: every pod
// failure the controller diagnoses (its degradedReasons but
// EndpointUnavailable, which needs the endpoint check and real TEI) past a
// short progress deadline, pods waiting on a node or an image pull before
// the default one, a missing token Secret, a rollout that does not finish,
// scaled to zero and Ready.
func healthStates() []healthState {
	stalled := func(reason string, option fixtures.Option) healthState {
		return healthState{name: reason, options: []fixtures.Option{option, pastDeadline}, ready: metav1.ConditionFalse, reason: reason,
			stalled: true, argo: healthcheck.Degraded, flux: healthcheck.Failed}
	}
	waiting := func(reason string, option fixtures.Option) healthState {
		return healthState{name: reason + "BeforeTheDeadline", options: []fixtures.Option{option}, ready: metav1.ConditionFalse, reason: reason,
			argo: healthcheck.Progressing, flux: healthcheck.InProgress}
	}
	crash := stalled(embedopsv1.CrashLoopBackOffReason, simulating(harness.SimulateCrashLoopBackOff,
		map[string]string{harness.SimulateMessageAnnotation: crashMessage}))
	crash.fixture = "degraded.yaml"
	pull := waiting(embedopsv1.ImagePullBackOffReason, simulating(harness.SimulateImagePullBackOff, nil))
	pull.options = append(pull.options, func(s *embedopsv1.EmbeddingServer) { s.Spec.Image = missingImage })
	pull.fixture = "image_pull_backoff.yaml"
	node := waiting(embedopsv1.UnschedulableReason, fixtures.WithPodTemplate(unschedulable()))
	node.fixture = "unschedulable.yaml"
	noNode := stalled(embedopsv1.UnschedulableReason, fixtures.WithPodTemplate(unschedulable()))
	noNode.fixture = "progress_deadline_exceeded.yaml"
	return []healthState{
		crash, pull, node, noNode,
		stalled(embedopsv1.ErrImagePullReason, simulating(harness.SimulateErrImagePull, nil)),
		stalled(embedopsv1.CreateContainerConfigErrorReason, simulating(harness.SimulateCreateContainerConfigError, nil)),
		stalled(embedopsv1.OOMKilledReason, simulating(harness.SimulateOOMKilled, nil)),
		{name: "SecretNotFound", options: []fixtures.Option{fixtures.WithToken("hf-token", "token")},
			ready: metav1.ConditionFalse, reason: embedopsv1.SecretNotFoundReason, stalled: true,
			argo: healthcheck.Degraded, flux: healthcheck.Failed, fixture: "stalled.yaml"},
		{name: "RollingOut", change: func(s *embedopsv1.EmbeddingServer) {
			simulating(harness.SimulateNotReady, nil)(s)
		}, ready: metav1.ConditionFalse, reason: embedopsv1.InitializingReason, message: "0/1 replicas ready",
			argo: healthcheck.Progressing, flux: healthcheck.InProgress, fixture: "reconciling.yaml"},
		{name: "ScaledToZero", options: []fixtures.Option{fixtures.WithReplicas(0)},
			ready: metav1.ConditionTrue, reason: embedopsv1.ScaledToZeroReason,
			argo: healthcheck.Healthy, flux: healthcheck.Current, fixture: "scaled_to_zero.yaml"},
		{name: "Ready", ready: metav1.ConditionTrue, reason: embedopsv1.AvailableReason, message: "1/1 replicas ready",
			argo: healthcheck.Healthy, flux: healthcheck.Current, fixture: "healthy.yaml"},
	}
}

// TestHealthChecksReadWhatTheControllerWrites drives real servers into each
// state and runs the shipped Argo CD health Lua and Flux healthCheckExprs
// on the status the controller wrote; the Argo CD test cases recorded from
// these states must still carry what the controller writes.
func TestHealthChecksReadWhatTheControllerWrites(t *testing.T) {
	t.Parallel()
	root, err := harness.RepoRoot()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	script, err := healthcheck.ArgoCDScript(root, serverGroupKind)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	exprs, err := healthcheck.ShippedExprs(root)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	expr, err := healthcheck.ExprFor(exprs, embedopsv1.EmbeddingServerKind)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	for _, state := range healthStates() {
		t.Run(state.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			server, obj := recordState(t, state)
			seen := describeStatus(server)

			argo, err := healthcheck.RunArgoCD(script, obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(argo.Status).To(Equal(state.argo), "Argo CD reads %s as %s", seen, argo)
			if state.argo == healthcheck.Degraded {
				g.Expect(argo.Message).To(Equal(conditions.GetMessage(server, embedopsv1.ReadyCondition)))
			}
			flux, err := healthcheck.FluxStatus(expr, obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(flux).To(Equal(state.flux), "Flux reads %s as %s", seen, flux)
			if state.fixture != "" {
				expectFixture(t, state.fixture, server)
			}
		})
	}
}

// recordState creates a server in a namespace of its own, changes it once
// Ready when the state says so, and waits until Ready says the state; it
// returns the server and the same object as Argo CD and Flux read it.
func recordState(t *testing.T, state healthState) (*embedopsv1.EmbeddingServer, map[string]any) {
	t.Helper()
	g := NewWithT(t)
	created := fixtures.EmbeddingServer(cluster.Namespace(t), recordedServer, state.options...)
	g.Expect(cluster.Client.Create(t.Context(), created)).To(Succeed())
	key := client.ObjectKeyFromObject(created)
	if state.change != nil {
		expectReady(t, key, metav1.ConditionTrue, embedopsv1.AvailableReason)
		update(t, key, state.change)
	}
	server := expectReadyWith(t, key, state.ready, state.reason, state.message)
	if state.stalled {
		server = expectStalled(t, key, state.reason)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(server)
	g.Expect(err).NotTo(HaveOccurred())
	obj["apiVersion"], obj["kind"] = embedopsv1.GroupVersion.String(), embedopsv1.EmbeddingServerKind
	return server, obj
}

// expectReadyWith is expectReady, also waiting for message unless empty.
func expectReadyWith(t *testing.T, key client.ObjectKey, status metav1.ConditionStatus, reason, message string) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := expectReady(t, key, status, reason)
	if message == "" {
		return server
	}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), key, server)).To(Succeed())
		g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(reason))
		g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(Equal(message))
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
	}).WithTimeout(settle).Should(Succeed())
	return server
}

// expectStalled waits until the server is Stalled with reason for its
// current generation, Ready=False with the same reason.
func expectStalled(t *testing.T, key client.ObjectKey, reason string) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), key, server)).To(Succeed())
		g.Expect(conditions.IsTrue(server, embedopsv1.StalledCondition)).To(BeTrue(), describeStatus(server))
		g.Expect(conditions.GetReason(server, embedopsv1.StalledCondition)).To(Equal(reason), describeStatus(server))
		g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(reason), describeStatus(server))
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
	return server
}

// describeStatus prints the kstatus conditions and phase for a failure.
func describeStatus(server *embedopsv1.EmbeddingServer) string {
	s := fmt.Sprintf("phase %s", server.Status.Phase)
	for _, c := range server.Status.Conditions {
		switch c.Type {
		case embedopsv1.ReadyCondition, embedopsv1.ReconcilingCondition, embedopsv1.StalledCondition:
			s += fmt.Sprintf(", %s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return s
}
