package gitops

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Waits, generous: the machine has 2 cores shared with other clusters.
const (
	// settle bounds one step: a commit reaching the cluster and settling.
	settle = 5 * time.Minute
	// pollInterval is how often the test looks; source-controller and the
	// health checks move in steps of seconds.
	pollInterval = 500 * time.Millisecond
)

// revisionOf is how source-controller writes a commit on branch.
func revisionOf(commit string) string {
	return branch + "@sha1:" + commit
}

// expectAppliedAfterServerReady waits until the Kustomization is Ready at
// commit and returns the server. At every look it checks that a
// Kustomization Ready at commit has a server Ready at its current
// generation (read after it), and requires the Kustomization's Ready
// transition to come no earlier than the server's. With mustSeeWait it also
// requires to have seen the Kustomization running health checks for commit
// while the server was not Ready: a new server is not Ready for seconds,
// but a changed one may be Ready again between two looks, so for a change
// the check at every look is the proof.
func expectAppliedAfterServerReady(t *testing.T, namespace, commit string, mustSeeWait bool) *embedopsv1.EmbeddingServer {
	t.Helper()
	g := NewWithT(t)
	revision := revisionOf(commit)
	server := &embedopsv1.EmbeddingServer{}
	var ready *metav1.Condition
	waited := false
	g.Eventually(func(g Gomega) {
		status, err := kustomizationStatus(t.Context(), kustomizationKey(namespace))
		g.Expect(err).NotTo(HaveOccurred())
		serverReady := readyAtGeneration(t, g, namespace, server)
		if (runningHealthChecks(status, revision) && !serverReady) || healthCheckWaited(status, revision) {
			waited = true
		}
		ready = apimeta.FindStatusCondition(status.Conditions, meta.ReadyCondition)
		applied := ready != nil && ready.Status == metav1.ConditionTrue && status.LastAppliedRevision == revision
		if applied && !serverReady {
			StopTrying(fmt.Sprintf("the Kustomization is Ready at %s while the server is not", revision)).Now()
		}
		g.Expect(applied).To(BeTrue(), "Kustomization applied %q, attempted %q, Ready: %s", status.LastAppliedRevision, status.LastAttemptedRevision, describe(ready))
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
	if mustSeeWait {
		g.Expect(waited).To(BeTrue(), "the Kustomization never waited on the server's health at %s", revision)
	}
	t.Logf("seen the Kustomization wait on the server's health at %s: %t", revision, waited)
	serverReady := conditions.Get(server, embedopsv1.ReadyCondition)
	g.Expect(ready.LastTransitionTime.Before(&serverReady.LastTransitionTime)).To(BeFalse(),
		"the Kustomization turned Ready at %s, before the server at %s", ready.LastTransitionTime, serverReady.LastTransitionTime)
	return server
}

// readyAtGeneration reads the server into server and reports whether it is
// Ready at its current generation; a server not created yet is not Ready.
func readyAtGeneration(t *testing.T, g Gomega, namespace string, server *embedopsv1.EmbeddingServer) bool {
	err := cluster.Client.Get(t.Context(), serverKey(namespace), server)
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return conditions.IsTrue(server, embedopsv1.ReadyCondition) && server.Status.ObservedGeneration == server.Generation
}

// runningHealthChecks reports whether kustomize-controller is waiting on
// the health of what it applied at revision.
func runningHealthChecks(status *fluxStatus, revision string) bool {
	reconciling := apimeta.FindStatusCondition(status.Conditions, meta.ReconcilingCondition)
	return reconciling != nil && reconciling.Status == metav1.ConditionTrue &&
		strings.Contains(reconciling.Message, "Running health checks for revision "+revision)
}

// healthCheckPolls is how often kustomize-controller looks at the health of
// what it applied (kustomize-controller
// internal/controller/kustomization_controller.go, checkHealth:
// ssa.WaitOptions{Interval: 5 * time.Second}).
const healthCheckPolls = 5 * time.Second

// healthCheckWaited reports whether kustomize-controller's health check of
// revision found something unhealthy at least once: it then reports
// "Health check passed in <duration>" of at least one poll interval, while
// a check that found everything healthy at once passes in milliseconds.
// Unlike a poll of the Reconciling condition, this cannot miss a short wait.
func healthCheckWaited(status *fluxStatus, revision string) bool {
	healthy := apimeta.FindStatusCondition(status.Conditions, meta.HealthyCondition)
	if healthy == nil || healthy.Status != metav1.ConditionTrue || status.LastAppliedRevision != revision {
		return false
	}
	took, ok := strings.CutPrefix(healthy.Message, "Health check passed in ")
	if !ok {
		return false
	}
	duration, err := time.ParseDuration(took)
	return err == nil && duration >= healthCheckPolls*4/5
}

// describe prints a condition for a failure message.
func describe(c *metav1.Condition) string {
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// expectFluxBinding checks that the server's binding is Active and records
// commit, found through the Kustomization, and storageClass; it returns the
// binding's name.
func expectFluxBinding(t *testing.T, server *embedopsv1.EmbeddingServer, url, commit, storageClass string) string {
	t.Helper()
	g := NewWithT(t)
	g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())
	binding := &embedopsv1.ModelCacheBinding{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: server.Namespace, Name: server.Status.CacheBinding}, binding)).To(Succeed())
	g.Expect(binding.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(binding.Spec.Decision.StorageClassName).To(Equal(storageClass))
	source := binding.Spec.Source
	g.Expect(source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(source.Commit).To(Equal(commit))
	g.Expect(source.Revision).To(Equal(revisionOf(commit)))
	g.Expect(source.Repository).To(Equal(url))
	g.Expect(source.Path).To(Equal(serversPath))
	g.Expect(source.ObjectRef).To(Equal(&embedopsv1.SourceObjectReference{
		APIVersion: kustomizationGVK.GroupVersion().String(), Kind: kustomizationGVK.Kind,
		Namespace: server.Namespace, Name: kustomizationName,
	}))
	return binding.Name
}

// expectReleased waits until the binding is Released and its claims, of
// which it has at least one, are gone.
func expectReleased(t *testing.T, namespace, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		binding := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, binding)).To(Succeed())
		g.Expect(binding.Status.Phase).To(Equal(embedopsv1.BindingReleased))
		claims := binding.Spec.Resources.PersistentVolumeClaimNames
		g.Expect(claims).NotTo(BeEmpty())
		for _, claim := range claims {
			err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: claim}, &corev1.PersistentVolumeClaim{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim %s: %v", claim, err)
		}
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
}

// expectHealthCheckFailed waits until the Kustomization reports the failed
// health check of commit, pushed at pushed, and checks that it failed
// early, on the stalled server, well within its timeout. kustomize-controller
// v1.9.6 sets Stalled only for invalid expressions, denied access or
// disabled features: a failed health check is Ready=False with
// Reconciling=True ProgressingWithRetry, retried every retryInterval.
func expectHealthCheckFailed(t *testing.T, namespace, commit string, pushed time.Time) {
	t.Helper()
	g := NewWithT(t)
	revision := revisionOf(commit)
	failure := fmt.Sprintf("failed early due to stalled resources: [EmbeddingServer/%s/%s status: 'Failed'", namespace, serverName)
	g.Eventually(func(g Gomega) {
		status, err := kustomizationStatus(t.Context(), kustomizationKey(namespace))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status.LastAttemptedRevision).To(Equal(revision))
		ready := apimeta.FindStatusCondition(status.Conditions, meta.ReadyCondition)
		g.Expect(ready).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", meta.HealthCheckFailedReason)), describe(ready))
		g.Expect(ready.Message).To(ContainSubstring(failure))
		g.Expect(apimeta.FindStatusCondition(status.Conditions, meta.StalledCondition)).To(BeNil())
		reconciling := apimeta.FindStatusCondition(status.Conditions, meta.ReconcilingCondition)
		g.Expect(reconciling).To(HaveField("Reason", meta.ProgressingWithRetryReason), describe(reconciling))
		g.Expect(status.LastAppliedRevision).NotTo(Equal(revision))
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
	elapsed := time.Since(pushed)
	t.Logf("the Kustomization reported the failure %s after the push", elapsed.Round(time.Second))
	g.Expect(elapsed).To(BeNumerically("<", kustomizationTimeout/2), "a failure this late may have been the timeout")

	server := &embedopsv1.EmbeddingServer{}
	g.Expect(cluster.Client.Get(t.Context(), serverKey(namespace), server)).To(Succeed())
	stalled := conditions.Get(server, embedopsv1.StalledCondition)
	g.Expect(stalled).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", embedopsv1.SecretNotFoundReason)), describe(stalled))
}
