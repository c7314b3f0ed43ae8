package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// A new binding is its creator's until the creator's first reference writes
// its first status: the binding controller writes nothing to it meanwhile.
// A Shared one, which its creator references at once, whose creator never
// referenced it (its controller died in between) is taken over once
// ledger.CreatorGrace has passed: Active, unreferenced and idle, so it
// retires after its retainFor like any binding nobody uses. (A PerReplica
// one is left to a creator that exists: ledger_firstref_test.)
func TestABindingItsCreatorNeverReferencedGoesIdleAfterTheGrace(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	server := liveServer(t, g, env.Client, namespace, "tei", fixtures.WithCacheMode(embedopsv1.CacheModeShared))
	d, err := decision.For(server)
	g.Expect(err).NotTo(HaveOccurred())
	binding := builder.Binding(server, d, decision.BindingName(d), embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: metav1.Now()})
	g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())

	now, _ := newTestLedger(t, g, nil)
	result, err := now.Advance(t.Context(), binding)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.RequeueAfter).To(BeNumerically(">", ledger.CreatorGrace/2), "it looks again when the grace ends")
	g.Expect(readBinding(t, g, env.Client, binding).Status.Phase).To(BeEmpty(), "nothing written while the creator may still write")

	later, _ := newTestLedger(t, g, nil, ledger.Options{Now: func() time.Time { return time.Now().Add(ledger.CreatorGrace + time.Second) }})
	_, err = later.Advance(t.Context(), readBinding(t, g, env.Client, binding))
	g.Expect(err).NotTo(HaveOccurred())
	taken := readBinding(t, g, env.Client, binding)
	g.Expect(taken.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(taken.Status.RequestReferences).To(BeEmpty())
	g.Expect(taken.Status.IdleSince).NotTo(BeNil(), "idle from now on, so it retires after retainFor")
}
