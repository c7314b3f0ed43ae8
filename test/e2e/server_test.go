package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// settle bounds how long a server may take to reach a state on 2 cores.
const settle = 3 * time.Minute

// newServer is a fixture server, with a pod template patch unless nil.
func newServer(namespace, name string, podTemplate map[string]any) *embedopsv1.EmbeddingServer {
	if podTemplate == nil {
		return fixtures.EmbeddingServer(namespace, name)
	}
	return fixtures.EmbeddingServer(namespace, name, fixtures.WithPodTemplate(podTemplate))
}

// simulated is a pod template patch that asks kwok for a pod state.
func simulated(state string) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": map[string]any{harness.SimulateAnnotation: state}}}
}

// unschedulable is a pod template patch no node can satisfy.
func unschedulable() map[string]any {
	selector := map[string]any{}
	for k, v := range harness.UnschedulableNodeSelector() {
		selector[k] = v
	}
	return map[string]any{"spec": map[string]any{"nodeSelector": selector}}
}

// expectReady waits until the server's Ready condition has status and reason.
func expectReady(t *testing.T, key client.ObjectKey, status metav1.ConditionStatus, reason string) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), key, server)).To(Succeed())
		ready := conditions.Get(server, embedopsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status), "Ready is %s/%s: %s", ready.Status, ready.Reason, ready.Message)
		g.Expect(ready.Reason).To(Equal(reason), "Ready is %s/%s: %s", ready.Status, ready.Reason, ready.Message)
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
	return server
}

// update changes a server, retrying on conflicts with the controller.
func update(t *testing.T, key client.ObjectKey, change func(*embedopsv1.EmbeddingServer)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		server := &embedopsv1.EmbeddingServer{}
		if err := cluster.Client.Get(t.Context(), key, server); err != nil {
			return err
		}
		change(server)
		return cluster.Client.Update(t.Context(), server)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func TestKubectlWaitsForAReadyServer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	g.Expect(cluster.Client.Create(t.Context(), newServer(namespace, "minimal", nil))).To(Succeed())

	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	wait := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "kubectl"), "--kubeconfig", cluster.Kubeconfig,
		"wait", "--for=condition=Ready", "es/minimal", "-n", namespace, "--timeout="+settle.String())
	out, err := wait.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl wait: %s", out)
	g.Expect(string(out)).To(ContainSubstring("condition met"))

	// Its PerReplica binding turns Ready once the claim the StatefulSet
	// made is Bound, though the claim has no owner to wake the binding.
	server := &embedopsv1.EmbeddingServer{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "minimal"}, server)).To(Succeed())
	g.Expect(server.Spec.Cache.Mode).To(Equal(embedopsv1.CacheModePerReplica))
	g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())
	wait = exec.CommandContext(t.Context(), filepath.Join(root, "bin", "kubectl"), "--kubeconfig", cluster.Kubeconfig,
		"wait", "--for=condition=Ready", "mcb/"+server.Status.CacheBinding, "-n", namespace, "--timeout="+settle.String())
	out, err = wait.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl wait: %s", out)
	g.Expect(string(out)).To(ContainSubstring("condition met"))
	expectUntrackedClaims(t, g, namespace, "minimal")
}

// expectUntrackedClaims checks the claims kube-controller-manager's
// StatefulSet controller made for the server: they carry every label of the
// StatefulSet's selector (it copies them, kubernetes v1.37.2
// pkg/controller/statefulset/stateful_set_utils.go,
// getPersistentVolumeClaims), and neither carries a GitOps tracking key
// (builder.TrackingKeys), which Argo CD's label tracking would take as its
// own and prune.
func expectUntrackedClaims(t *testing.T, g *WithT, namespace, name string) {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, sts)).To(Succeed())
	var claims corev1.PersistentVolumeClaimList
	g.Expect(cluster.Client.List(t.Context(), &claims, client.InNamespace(namespace))).To(Succeed())
	g.Expect(claims.Items).NotTo(BeEmpty())
	for _, key := range builder.TrackingKeys {
		g.Expect(sts.Spec.Selector.MatchLabels).NotTo(HaveKey(key))
	}
	for _, claim := range claims.Items {
		for key, value := range sts.Spec.Selector.MatchLabels {
			g.Expect(claim.Labels).To(HaveKeyWithValue(key, value), "claim %s: the StatefulSet controller copies the selector", claim.Name)
		}
		for _, key := range builder.TrackingKeys {
			g.Expect(claim.Labels).NotTo(HaveKey(key), "claim %s", claim.Name)
		}
	}
}

func TestPodFailuresAppearOnReadyAndClear(t *testing.T) {
	t.Parallel()
	cases := []struct {
		reason string
		patch  map[string]any
	}{
		{embedopsv1.ImagePullBackOffReason, simulated("ImagePullBackOff")},
		{embedopsv1.ErrImagePullReason, simulated("ErrImagePull")},
		{embedopsv1.CreateContainerConfigErrorReason, simulated("CreateContainerConfigError")},
		{embedopsv1.CrashLoopBackOffReason, simulated("CrashLoopBackOff")},
		{embedopsv1.OOMKilledReason, simulated("OOMKilled")},
		{embedopsv1.UnschedulableReason, unschedulable()},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			namespace := cluster.Namespace(t)
			server := newServer(namespace, "failing", tc.patch)
			NewWithT(t).Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
			key := client.ObjectKeyFromObject(server)

			failing := expectReady(t, key, metav1.ConditionFalse, tc.reason)
			NewWithT(t).Expect(conditions.GetMessage(failing, embedopsv1.ReadyCondition)).To(ContainSubstring("failing-0"), "the message names the pod")

			update(t, key, func(s *embedopsv1.EmbeddingServer) { s.Spec.PodTemplate = nil })
			expectReady(t, key, metav1.ConditionTrue, embedopsv1.AvailableReason)
		})
	}
}

func TestScalingReportsTheRightReasons(t *testing.T) {
	t.Parallel()
	namespace := cluster.Namespace(t)
	server := newServer(namespace, "scaled", nil)
	NewWithT(t).Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	key := client.ObjectKeyFromObject(server)
	expectReady(t, key, metav1.ConditionTrue, embedopsv1.AvailableReason)

	for _, step := range []struct {
		replicas int32
		reason   string
	}{
		{3, embedopsv1.AvailableReason},
		{0, embedopsv1.ScaledToZeroReason},
		{1, embedopsv1.AvailableReason},
	} {
		update(t, key, func(s *embedopsv1.EmbeddingServer) { s.Spec.Replicas = ptr.To(step.replicas) })
		expectReady(t, key, metav1.ConditionTrue, step.reason)
		// Ready can turn True a reconcile before the new claims' CacheReady
		// does, so the phase settles on the same or the next status write.
		phase := map[bool]embedopsv1.ServerPhase{true: embedopsv1.PhaseScaledToZero, false: embedopsv1.PhaseReady}[step.replicas == 0]
		NewWithT(t).Eventually(func(g Gomega) {
			scaled := &embedopsv1.EmbeddingServer{}
			g.Expect(cluster.Client.Get(t.Context(), key, scaled)).To(Succeed())
			g.Expect(scaled.Status.ReadyReplicas).To(Equal(step.replicas))
			g.Expect(scaled.Status.Phase).To(Equal(phase))
		}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
	}
}
