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

// TestDegradedReasonsAreFailuresToTheGitOpsTools checks that the shipped
// Argo CD health Lua and Flux healthCheckExprs read every reason this
// reconciler calls degraded as Degraded and Failed, with Reconciling=True
// as finalizeStatus leaves it. test/e2e checks the reasons kwok can
// simulate on servers; this covers the list itself, EndpointUnavailable
// included.
func TestDegradedReasonsAreFailuresToTheGitOpsTools(t *testing.T) {
	g := NewWithT(t)
	script, err := healthcheck.ArgoCDScript(repoRoot, "embedops.dev/EmbeddingServer")
	g.Expect(err).NotTo(HaveOccurred())
	exprs, err := healthcheck.ShippedExprs(repoRoot)
	g.Expect(err).NotTo(HaveOccurred())
	expr, err := healthcheck.ExprFor(exprs, embedopsv1.EmbeddingServerKind)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(degradedReasons).NotTo(BeEmpty())

	for _, reason := range degradedReasons {
		t.Run(reason, func(t *testing.T) {
			g := NewWithT(t)
			server := withConditions(false,
				conditions.FalseCondition(embedopsv1.ReadyCondition, reason, "pod tei-0: %s", reason),
				conditions.TrueCondition(embedopsv1.ReconcilingCondition, embedopsv1.ProgressingReason, "pod tei-0: %s", reason))
			server.TypeMeta = metav1.TypeMeta{APIVersion: embedopsv1.GroupVersion.String(), Kind: embedopsv1.EmbeddingServerKind}
			server.Status.ObservedGeneration = server.Generation
			server.Status.Phase = serverPhase(server, "")
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(server)
			g.Expect(err).NotTo(HaveOccurred())

			argo, err := healthcheck.RunArgoCD(script, obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(argo).To(Equal(healthcheck.ArgoCDHealth{Status: healthcheck.Degraded, Message: "pod tei-0: " + reason}))
			flux, err := healthcheck.FluxStatus(expr, obj)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(flux).To(Equal(healthcheck.Failed))
		})
	}
}
