package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/healthcheck"
)

// repoRoot is the repository root, seen from this package.
const repoRoot = "../.."

// shippedHealthChecks are the shipped Argo CD health Lua and Flux
// healthCheckExprs for EmbeddingServer.
func shippedHealthChecks(t *testing.T) (string, healthcheck.Expr) {
	t.Helper()
	g := NewWithT(t)
	script, err := healthcheck.ArgoCDScript(repoRoot, "embedops.dev/EmbeddingServer")
	g.Expect(err).NotTo(HaveOccurred())
	exprs, err := healthcheck.ShippedExprs(repoRoot)
	g.Expect(err).NotTo(HaveOccurred())
	expr, err := healthcheck.ExprFor(exprs, embedopsv1.EmbeddingServerKind)
	g.Expect(err).NotTo(HaveOccurred())
	return script, expr
}

// expectHealth runs the shipped health checks on server as Argo CD and Flux
// read it, and expects their statuses, and the Argo CD message unless
// empty.
func expectHealth(t *testing.T, g Gomega, server *embedopsv1.EmbeddingServer, argo, flux, message string) {
	t.Helper()
	script, expr := shippedHealthChecks(t)
	server = server.DeepCopy()
	server.TypeMeta = metav1.TypeMeta{APIVersion: embedopsv1.GroupVersion.String(), Kind: embedopsv1.EmbeddingServerKind}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(server)
	g.Expect(err).NotTo(HaveOccurred())
	gotArgo, err := healthcheck.RunArgoCD(script, obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotArgo.Status).To(Equal(argo), "Argo CD: %s", gotArgo.Message)
	if message != "" {
		g.Expect(gotArgo.Message).To(Equal(message))
	}
	gotFlux, err := healthcheck.FluxStatus(expr, obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotFlux).To(Equal(flux))
}

// TestFailingPodsAreProgressUntilTheDeadlineToTheGitOpsTools checks that the
// shipped Argo CD health Lua and Flux healthCheckExprs read every reason
// this reconciler diagnoses as progress while the server waits on it
// (Reconciling=True, as finalizeStatus leaves it before
// spec.progressDeadline) and as a failure once the server is Stalled with it
// (stallPastDeadline). test/e2e checks the reasons kwok can simulate on
// servers; this covers the list itself, EndpointUnavailable included.
func TestFailingPodsAreProgressUntilTheDeadlineToTheGitOpsTools(t *testing.T) {
	NewWithT(t).Expect(degradedReasons).NotTo(BeEmpty())
	for _, reason := range degradedReasons {
		t.Run(reason, func(t *testing.T) {
			g := NewWithT(t)
			waiting := withConditions(false,
				conditions.FalseCondition(embedopsv1.ReadyCondition, reason, "pod tei-0: %s", reason),
				conditions.TrueCondition(embedopsv1.ReconcilingCondition, embedopsv1.ProgressingReason, "pod tei-0: %s", reason))
			waiting.Status.ObservedGeneration = waiting.Generation
			waiting.Status.Phase = serverPhase(waiting, "")
			g.Expect(waiting.Status.Phase).To(Equal(embedopsv1.PhaseDegraded))
			expectHealth(t, g, waiting, healthcheck.Progressing, healthcheck.InProgress, "pod tei-0: "+reason)

			stalled := withConditions(false,
				conditions.FalseCondition(embedopsv1.ReadyCondition, reason, "pod tei-0: %s; no progress", reason),
				conditions.TrueCondition(embedopsv1.StalledCondition, reason, "pod tei-0: %s; no progress", reason))
			stalled.Status.ObservedGeneration = stalled.Generation
			stalled.Status.Phase = serverPhase(stalled, "")
			g.Expect(stalled.Status.Phase).To(Equal(embedopsv1.PhaseFailed))
			expectHealth(t, g, stalled, healthcheck.Degraded, healthcheck.Failed, "pod tei-0: "+reason+"; no progress")
		})
	}
}
