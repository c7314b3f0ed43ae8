package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/conditions/check"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
)

// createServer creates a server and returns its key.
func createServer(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) types.NamespacedName {
	t.Helper()
	g.Expect(env.Client.Create(t.Context(), server)).To(Succeed())
	return client.ObjectKeyFromObject(server)
}

// updateServer re-reads a server, changes it with options and updates it,
// retrying on conflicts with the controller.
func updateServer(t *testing.T, g *WithT, key types.NamespacedName, options ...fixtures.Option) {
	t.Helper()
	g.Eventually(func() error {
		server := &embedopsv1.EmbeddingServer{}
		if err := env.Client.Get(t.Context(), key, server); err != nil {
			return err
		}
		for _, option := range options {
			option(server)
		}
		return env.Client.Update(t.Context(), server)
	}).Should(Succeed())
}

// getServer reads a server.
func getServer(t *testing.T, g Gomega, key types.NamespacedName) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	g.Expect(env.Client.Get(t.Context(), key, server)).To(Succeed())
	return server
}

// waitForCondition waits until the server's condition has the status and
// reason for its current generation, and returns the server.
func waitForCondition(t *testing.T, g *WithT, key types.NamespacedName, conditionType string, status metav1.ConditionStatus, reason string) *embedopsv1.EmbeddingServer {
	t.Helper()
	var server *embedopsv1.EmbeddingServer
	g.Eventually(func(g Gomega) {
		server = getServer(t, g, key)
		condition := conditions.Get(server, conditionType)
		g.Expect(condition).NotTo(BeNil(), "no %s condition in %v", conditionType, server.Status.Conditions)
		g.Expect(condition.ObservedGeneration).To(Equal(server.Generation), "%s is of an older generation", conditionType)
		g.Expect(condition.Status).To(Equal(status), "%s: %s", conditionType, condition.Message)
		g.Expect(condition.Reason).To(Equal(reason), "%s: %s", conditionType, condition.Message)
	}).Should(Succeed())
	return server
}

// waitForPhase waits until the server reports the phase for its current
// generation. Conditions and the rest of the status are two patches, so a
// phase is read after its conditions.
func waitForPhase(t *testing.T, g *WithT, key types.NamespacedName, phase embedopsv1.ServerPhase) *embedopsv1.EmbeddingServer {
	t.Helper()
	var server *embedopsv1.EmbeddingServer
	g.Eventually(func(g Gomega) {
		server = getServer(t, g, key)
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
		g.Expect(server.Status.Phase).To(Equal(phase), "%+v", server.Status.Conditions)
	}).Should(Succeed())
	return server
}

// requestReconcile sets reconcile.fluxcd.io/requestedAt to a new token and
// waits until the controller reports it handled.
func requestReconcile(t *testing.T, g *WithT, key types.NamespacedName) *embedopsv1.EmbeddingServer {
	t.Helper()
	token := fmt.Sprintf("%d", time.Now().UnixNano())
	server := getServer(t, g, key)
	patch := client.MergeFrom(server.DeepCopy())
	metav1.SetMetaDataAnnotation(&server.ObjectMeta, meta.ReconcileRequestAnnotation, token)
	g.Expect(env.Client.Patch(t.Context(), server, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		server = getServer(t, g, key)
		g.Expect(server.Status.LastHandledReconcileAt).To(Equal(token))
	}).Should(Succeed())
	return server
}

// checkConditions fails when the server's conditions break the kstatus rules
// of fluxcd/pkg/runtime/conditions/check.
func checkConditions(t *testing.T, g *WithT, key types.NamespacedName) {
	t.Helper()
	checker := check.NewChecker(env.Client, &check.Conditions{
		NegativePolarity: []string{embedopsv1.StalledCondition, embedopsv1.ReconcilingCondition},
	})
	checker.WithT(g).CheckErr(t.Context(), &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
}

// waitForStatefulSet waits until the server's StatefulSet exists.
func waitForStatefulSet(t *testing.T, g *WithT, key types.NamespacedName) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error { return env.Client.Get(t.Context(), key, sts) }).Should(Succeed())
	return sts
}

// markStatefulSetReady plays the StatefulSet controller: all desired
// replicas exist and are ready at the current generation.
func markStatefulSetReady(t *testing.T, g *WithT, key types.NamespacedName) {
	t.Helper()
	setStatefulSetStatus(t, g, key, func(sts *appsv1.StatefulSet) bool {
		sts.Status = readyStatus(sts, replicasOf(sts))
		return true
	})
}

// readyStatus is the status the StatefulSet controller reports when every
// replica exists at the current generation and ready of them are ready.
func readyStatus(sts *appsv1.StatefulSet, ready int32) appsv1.StatefulSetStatus {
	replicas := replicasOf(sts)
	return appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: replicas, ReadyReplicas: ready,
		AvailableReplicas: ready, CurrentReplicas: replicas, UpdatedReplicas: replicas}
}

// isNotFound asserts that an object does not exist.
func isNotFound(t *testing.T, obj client.Object, key types.NamespacedName) func() bool {
	return func() bool {
		return apierrors.IsNotFound(env.Client.Get(t.Context(), key, obj))
	}
}

// warningEvents returns the Warning events about an object with the reason.
func warningEvents(t *testing.T, g Gomega, namespace, name, reason string) []corev1.Event {
	t.Helper()
	return eventsAbout(t, g, namespace, name, corev1.EventTypeWarning, reason)
}

// eventsAbout returns the events of a type about an object with the reason.
func eventsAbout(t *testing.T, g Gomega, namespace, name, eventType, reason string) []corev1.Event {
	t.Helper()
	var events corev1.EventList
	g.Expect(env.Client.List(t.Context(), &events, client.InNamespace(namespace))).To(Succeed())
	var found []corev1.Event
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Type == eventType && e.Reason == reason {
			found = append(found, e)
		}
	}
	return found
}

// playStatefulSetController plays kube-controller-manager's StatefulSet
// controller, which envtest does not run, for every StatefulSet of the
// namespace until the test ends: each one's pods are all ready at once, at
// its current generation. Tests that move a server to new storage use it
// so the rollout completes; the rollout's own steps are tested apart.
func playStatefulSetController(t *testing.T, namespace string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var list appsv1.StatefulSetList
			if err := env.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
				return false, nil
			}
			for i := range list.Items {
				sts := &list.Items[i]
				replicas := replicasOf(sts)
				if sts.Status.ObservedGeneration == sts.Generation && sts.Status.ReadyReplicas == replicas && sts.Status.Replicas == replicas {
					continue
				}
				sts.Status = readyStatus(sts, replicas)
				_ = env.Client.Status().Update(ctx, sts) // a conflict is retried at the next poll.
			}
			return false, nil
		})
	}()
}
