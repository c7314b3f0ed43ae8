package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// haltPoint is a place where a new server's first reconcile stops before
// it builds its children, and what its conditions then say.
type haltPoint struct {
	name string
	// setUp prepares the namespace and returns the server to create.
	setUp func(t *testing.T, g *WithT, namespace string) *embedopsv1.EmbeddingServer
	// condition, status and reason are what the halted reconcile reports.
	condition string
	status    metav1.ConditionStatus
	reason    string
}

// haltPoints are the halts before the children are built: each is a
// reconcile that never reaches buildChildren or reconcileReadiness.
var haltPoints = []haltPoint{{
	name: "shared cache waits for its populate Job",
	setUp: func(_ *testing.T, _ *WithT, namespace string) *embedopsv1.EmbeddingServer {
		return fixtures.EmbeddingServer(namespace, "tei", fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithReplicas(2))
	},
	condition: embedopsv1.ModelReadyCondition, status: metav1.ConditionFalse, reason: embedopsv1.DownloadingReason,
}, {
	name: "per-replica cache waits for its resolve Job",
	setUp: func(_ *testing.T, _ *WithT, namespace string) *embedopsv1.EmbeddingServer {
		return fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2))
	},
	condition: embedopsv1.ModelReadyCondition, status: metav1.ConditionFalse, reason: embedopsv1.DownloadingReason,
}, {
	name: "existing claim still pending",
	setUp: func(t *testing.T, g *WithT, namespace string) *embedopsv1.EmbeddingServer {
		userClaim(t, g, namespace, "pending-models", corev1.ClaimPending)
		return fixtures.EmbeddingServer(namespace, "tei", fixtures.WithExistingClaim("pending-models"))
	},
	condition: embedopsv1.StalledCondition, status: metav1.ConditionTrue, reason: embedopsv1.ClaimNotBoundReason,
}, {
	name: "ownership conflict with a foreign Service",
	setUp: func(t *testing.T, g *WithT, namespace string) *embedopsv1.EmbeddingServer {
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tei"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
		g.Expect(env.Client.Create(t.Context(), foreign)).To(Succeed())
		return fixtures.EmbeddingServer(namespace, "tei")
	},
	condition: embedopsv1.StalledCondition, status: metav1.ConditionTrue, reason: embedopsv1.OwnershipConflictReason,
}, {
	name: "token Secret missing",
	setUp: func(_ *testing.T, _ *WithT, namespace string) *embedopsv1.EmbeddingServer {
		return fixtures.EmbeddingServer(namespace, "tei", fixtures.WithToken("missing", "token"))
	},
	condition: embedopsv1.StalledCondition, status: metav1.ConditionTrue, reason: embedopsv1.SecretNotFoundReason,
}}

// Wherever a new server's first reconcile halts, its status has the
// selector, the replica counts and the phase: the scale subresource an HPA
// reads (kubernetes v1.37.2 pkg/controller/podautoscaler/horizontal.go)
// has a selector, and kubectl get has its columns.
func TestEveryHaltWritesTheScaleStatus(t *testing.T) {
	t.Parallel()
	for _, halt := range haltPoints {
		t.Run(halt.name, func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			namespace := harness.Namespace(t, env.Client)
			startManager(t, namespace, withPopulator)
			key := createServer(t, g, halt.setUp(t, g, namespace))

			server := waitForCondition(t, g, key, halt.condition, halt.status, halt.reason)
			g.Expect(server.Status.Selector).To(Equal(podSelector(server)))
			g.Expect(server.Status.Replicas).To(BeZero(), "no StatefulSet exists")
			g.Expect(server.Status.Phase).NotTo(BeEmpty())
			g.Expect(conditions.IsFalse(server, embedopsv1.ReadyCondition)).To(BeTrue())
			expectScaleSelector(t, g, key, server.Status.Selector)
		})
	}
}

// A serving server whose reconcile halts (its token Secret is deleted,
// which stalls it at accept) still reports what its StatefulSet's pods
// are doing: the counts follow the observation, not the last reconcile
// that reached readiness.
func TestAHaltedServersReplicasFollowItsPods(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2)))
	waitForStatefulSet(t, g, key)
	updateServer(t, g, key, fixtures.WithToken("missing", "token"))
	waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.SecretNotFoundReason)

	setStatefulSetReplicas(t, g, key, 2, 1)
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(server.Status.Replicas).To(BeNumerically("==", 2))
		g.Expect(server.Status.ReadyReplicas).To(BeNumerically("==", 1))
		g.Expect(conditions.GetReason(server, embedopsv1.StalledCondition)).To(Equal(embedopsv1.SecretNotFoundReason))
	}).Should(Succeed())
}

// expectScaleSelector reads the server's scale subresource as the HPA
// controller does and expects its selector.
func expectScaleSelector(t *testing.T, g *WithT, key types.NamespacedName, selector string) {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	scale := &autoscalingv1.Scale{}
	g.Expect(env.Client.SubResource("scale").Get(t.Context(), server, scale)).To(Succeed())
	g.Expect(scale.Status.Selector).To(Equal(selector))
}
