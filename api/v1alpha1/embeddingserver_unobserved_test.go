package v1alpha1_test

import (
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/healthcheck"
)

// A server whose status no controller has written yet, as the API server
// serves it, is in progress to kstatus (Flux's health checks without
// healthCheckExprs), to the shipped healthCheckExprs and to the shipped
// Argo CD health check: the controller may write its first status late
// (the first status waits for Ready) without any of them reading it as
// healthy meanwhile.
func TestAServerNobodyObservedIsInProgressToEveryHealthCheck(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	obj := serverManifest(t, namespace, "new", "model:\n  name: BAAI/bge-small-en-v1.5\n")
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
	served := &unstructured.Unstructured{}
	served.SetGroupVersionKind(embedopsv1.GroupVersion.WithKind(embedopsv1.EmbeddingServerKind))
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), served)).To(Succeed())
	g.Expect(served.Object).To(HaveKeyWithValue("status", map[string]any{"observedGeneration": int64(-1)}))

	typed := &embedopsv1.EmbeddingServer{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), typed)).To(Succeed())
	g.Expect(typed.StatusWritten()).To(BeFalse())

	result, err := kstatus.Compute(served)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Status).To(Equal(kstatus.InProgressStatus), result.Message)
	without := served.DeepCopy()
	unstructured.RemoveNestedField(without.Object, "status")
	result, err = kstatus.Compute(without)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Status).To(Equal(kstatus.CurrentStatus), "without the default, kstatus would read it as healthy")

	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	exprs, err := healthcheck.ShippedExprs(root)
	g.Expect(err).NotTo(HaveOccurred())
	expr, err := healthcheck.ExprFor(exprs, embedopsv1.EmbeddingServerKind)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(healthcheck.FluxStatus(expr, served.Object)).To(Equal(healthcheck.InProgress))
	script, err := healthcheck.ArgoCDScript(root, embedopsv1.GroupVersion.Group+"/"+embedopsv1.EmbeddingServerKind)
	g.Expect(err).NotTo(HaveOccurred())
	argo, err := healthcheck.RunArgoCD(script, served.Object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(argo.Status).To(Equal(healthcheck.Progressing), argo.Message)
}
