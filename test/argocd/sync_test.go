package argocd

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// degradedWithin is how soon after its push a server that cannot start
// must turn its Application Degraded (issue 38): embedops stalls it at once
// on a missing Secret, and Argo CD's health check shows it at its next
// refresh of the changed server.
const degradedWithin = 100 * time.Second

// TestArgoCDSyncsAServer follows one EmbeddingServer synced by an
// Application through two commits, audits its binding and deletes the
// Application.
func TestArgoCDSyncsAServer(t *testing.T) {
	namespace := cluster.Namespace(t)
	name := namespace
	repo := newRepository(t, "platform/"+namespace+".git")
	subject := "Serve bge-small"
	commitA := commit(t, repo, subject, map[string]string{serverFile(name): serverManifest(name, harness.DefaultStorageClass, "0s", "")})
	createApplication(t, name, namespace, repo.URL, serversPath)
	key := client.ObjectKey{Namespace: namespace, Name: name}

	var binding *embedopsv1.ModelCacheBinding
	step(t, "A: Progressing until the server is Ready, then Healthy; the binding records A", func(t *testing.T) {
		server := expectHealthyAfterServerReady(t, name, key, syncedAt(commitA))
		binding = expectArgoCDBinding(t, server, name, repo.URL, commitA)
	})
	step(t, "audit verifies the binding against the git server", func(t *testing.T) {
		expectAudited(t, namespace, binding.Name, commitA, subject)
	})
	step(t, "B reads a missing Secret: the Application is Degraded", func(t *testing.T) {
		pushed := time.Now()
		commitB := commit(t, repo, "Read the token from a Secret", map[string]string{serverFile(name): serverManifest(name, harness.DefaultStorageClass, "0s", "missing-token")})
		// As a git host's webhook would: Argo CD polls git every 3 minutes.
		annotateApplication(t, name, refreshAnnotation, "normal")
		expectDegraded(t, name, commitB, pushed)
	})
	step(t, "deleting the Application deletes the server and leaves the binding as a record", func(t *testing.T) {
		app, err := getApplication(t.Context(), name)
		g := NewWithT(t)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(app.GetFinalizers()).To(ContainElement(resourcesFinalizer))
		g.Expect(cluster.Client.Delete(t.Context(), app)).To(Succeed())
		expectDeletedLeavingBinding(t, name, key, binding)
	})
}

// expectHealthyAfterServerReady waits until the Application of a new
// server is Synced and Healthy at the revisions synced accepts and returns
// the server. At every look it checks that a Healthy Application has a
// server Ready at its current generation (read after it): before the
// server exists Argo CD has no Healthy state of it to show. It requires to
// have seen the Application Progressing while the server was not Ready.
func expectHealthyAfterServerReady(t *testing.T, app string, key client.ObjectKey, synced func(*appStatus) bool) *embedopsv1.EmbeddingServer {
	t.Helper()
	g := NewWithT(t)
	server := &embedopsv1.EmbeddingServer{}
	progressing := false
	g.Eventually(func(g Gomega) {
		status, serverReady := lookAt(t, g, app, key, server)
		if status.Health.Status == "Progressing" && !serverReady && synced(status) {
			progressing = true
		}
		healthy := status.Health.Status == "Healthy" && synced(status)
		if healthy && !serverReady && server.Name != "" {
			StopTrying(fmt.Sprintf("the Application is Healthy at %q %q while the server is not Ready", status.Sync.Revision, status.Sync.Revisions)).Now()
		}
		expectSyncedAndHealthy(g, status, healthy, serverReady)
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
	if !progressing {
		// A look may miss a short wait; Argo CD's event of the transition
		// cannot.
		g.Expect(applicationEvents(t, app)).To(ContainElement(progressingToHealthy),
			"the Application was never Progressing while the server was not Ready")
	}
	return server
}

// expectHealthyAfterChange waits, after a change of the server pushed at
// pushed, until the Application is Synced and Healthy at the revision
// synced accepts with the server Ready at its new generation. A look cannot
// tell a wrong Healthy from a stale one: for a moment after a sync Argo CD
// may show the sync revision with the health of the object from before it,
// as its watch cache had it (argo-cd v2.14.21 controller/state.go,
// CompareAppState reads the live state cache). Its events can: each
// Progressing -> Healthy transition since the push must come no earlier
// than the second the server turned Ready.
func expectHealthyAfterChange(t *testing.T, app string, key client.ObjectKey, synced func(*appStatus) bool, pushed time.Time) *embedopsv1.EmbeddingServer {
	t.Helper()
	g := NewWithT(t)
	server := &embedopsv1.EmbeddingServer{}
	g.Eventually(func(g Gomega) {
		status, serverReady := lookAt(t, g, app, key, server)
		expectSyncedAndHealthy(g, status, status.Health.Status == "Healthy" && synced(status), serverReady)
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
	ready := meta.FindStatusCondition(server.Status.Conditions, embedopsv1.ReadyCondition)
	for _, at := range healthyTransitions(t, app, pushed) {
		g.Expect(at.Truncate(time.Second).Before(ready.LastTransitionTime.Time)).To(BeFalse(),
			"the Application turned Healthy at %s, before the server turned Ready at %s", at, ready.LastTransitionTime)
	}
	return server
}

// lookAt reads the Application's status and the server, and reports
// whether the server is Ready at its current generation.
func lookAt(t *testing.T, g Gomega, app string, key client.ObjectKey, server *embedopsv1.EmbeddingServer) (*appStatus, bool) {
	status, err := applicationStatus(t.Context(), app)
	g.Expect(err).NotTo(HaveOccurred())
	return status, readyAtGeneration(t.Context(), g, key, server)
}

// expectSyncedAndHealthy is the end of both waits.
func expectSyncedAndHealthy(g Gomega, status *appStatus, healthy, serverReady bool) {
	g.Expect(status.Sync.Status).To(Equal("Synced"), "resources: %+v", status.Resources)
	g.Expect(healthy).To(BeTrue(), "Application health %s (%s) at %q %q", status.Health.Status, status.Health.Message, status.Sync.Revision, status.Sync.Revisions)
	g.Expect(serverReady).To(BeTrue())
}

// healthyTransitions are the times of the Application's Progressing ->
// Healthy events after since. Argo CD names each event
// "<app>.<UnixNano in hex>" (argo-cd v2.14.21 util/argo/audit_logger.go,
// logEvent), a finer clock than the events' timestamps.
func healthyTransitions(t *testing.T, app string, since time.Time) []time.Time {
	t.Helper()
	events := &corev1.EventList{}
	NewWithT(t).Expect(cluster.Client.List(t.Context(), events, client.InNamespace(harness.ArgoCDNamespace))).To(Succeed())
	var times []time.Time
	for _, event := range events.Items {
		if event.InvolvedObject.Kind != applicationGVK.Kind || event.InvolvedObject.Name != app || event.Message != progressingToHealthy {
			continue
		}
		nanos, err := strconv.ParseInt(event.Name[strings.LastIndex(event.Name, ".")+1:], 16, 64)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "event %s", event.Name)
		if at := time.Unix(0, nanos); at.After(since) {
			times = append(times, at)
		}
	}
	return times
}

// progressingToHealthy is the event Argo CD records when an Application's
// health turns from Progressing to Healthy (argo-cd controller/appcontroller.go,
// persistAppStatus).
const progressingToHealthy = "Updated health status: Progressing -> Healthy"

// applicationEvents are the messages of the events about the Application.
func applicationEvents(t *testing.T, app string) []string {
	t.Helper()
	events := &corev1.EventList{}
	NewWithT(t).Expect(cluster.Client.List(t.Context(), events, client.InNamespace(harness.ArgoCDNamespace))).To(Succeed())
	var messages []string
	for _, event := range events.Items {
		if event.InvolvedObject.Kind == applicationGVK.Kind && event.InvolvedObject.Name == app {
			messages = append(messages, event.Message)
		}
	}
	return messages
}

// syncedAt accepts a single-source Application synced at commit.
func syncedAt(commit string) func(*appStatus) bool {
	return func(s *appStatus) bool { return s.Sync.Revision == commit }
}

// expectDegraded waits until the Application has synced commit and is
// Degraded, which must happen within degradedWithin of pushed.
func expectDegraded(t *testing.T, app, commit string, pushed time.Time) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		status, err := applicationStatus(t.Context(), app)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status.Sync.Revision).To(Equal(commit))
		g.Expect(status.Health.Status).To(Equal("Degraded"), status.Health.Message)
	}).WithTimeout(degradedWithin - time.Since(pushed)).WithPolling(pollInterval).Should(Succeed())
}

// expectDeletedLeavingBinding waits until the Application and its server
// are gone, and checks that the binding remains, Released, its claims
// deleted.
func expectDeletedLeavingBinding(t *testing.T, app string, key client.ObjectKey, binding *embedopsv1.ModelCacheBinding) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		_, err := getApplication(t.Context(), app)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Application: %v", err)
		err = cluster.Client.Get(t.Context(), key, &embedopsv1.EmbeddingServer{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "server: %v", err)
		record := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(binding), record)).To(Succeed())
		g.Expect(record.Status.Phase).To(Equal(embedopsv1.BindingReleased))
		g.Expect(record.Spec.Source.Method).To(Equal(embedopsv1.SourceArgoCD))
		g.Expect(record.Spec.Source.Commit).To(Equal(binding.Spec.Source.Commit))
		claims := record.Spec.Resources.PersistentVolumeClaimNames
		g.Expect(claims).NotTo(BeEmpty())
		for _, claim := range claims {
			err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: key.Namespace, Name: claim}, &corev1.PersistentVolumeClaim{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim %s: %v", claim, err)
		}
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
}
