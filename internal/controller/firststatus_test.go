package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// A new server's first reconcile writes its status: the scale
// subresource's selector and replicas, and Ready and Reconciling, long
// before any pod is ready (envtest runs no StatefulSet controller), so an
// HPA applied with it finds the selector it requires (kubernetes v1.37.2
// pkg/controller/podautoscaler/horizontal.go: no selector is
// InvalidSelector) and kubectl get shows its columns.
func TestANewServersFirstReconcileWritesItsStatus(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	requests := startManager(t, namespace, func(o *ManagerOptions) { o.EmbeddingServer.ProgressInterval = time.Hour })
	before := requests.requestSnapshot()
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))

	server := waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
	g.Expect(server.Status.Selector).To(Equal(podSelector(server)))
	g.Expect(server.Status.Replicas).To(BeZero(), "no pod exists yet")
	g.Expect(conditions.IsTrue(server, embedopsv1.ReconcilingCondition)).To(BeTrue())
	g.Expect(server.Status.Phase).NotTo(BeEmpty())
	g.Expect(requests.requestsSince(before)).To(HaveKeyWithValue("PATCH embeddingservers/status", 1), "the first reconcile's status, written once")
}

// A stall is written at once.
func TestANewServersStallIsWrittenAtOnce(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithToken("missing", "token")))
	waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.SecretNotFoundReason)
}

// A retainFor edit before the server's first status, which would name the
// binding in use, still hands the storage over: the ledger finds the
// binding the server created and references. The status stays unwritten
// here because the API server refuses it (a webhook, a quota), as it may
// for a controller that dies between its first writes.
func TestRetainForChangeBeforeTheFirstStatusKeepsTheStorage(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManagerWrapping(t, namespace, func(c client.Client) client.Client { return serverStatusRefused{c} })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithRetainFor(time.Second),
		declaredAt(strings.Repeat("a", 40))))
	sts := waitForStatefulSet(t, g, key)
	server := getServer(t, g, key)
	old := createdBinding(t, g, server)
	g.Expect(getServer(t, g, key).StatusWritten()).To(BeFalse(), "the API server refuses the server's status")

	updateServer(t, g, key, fixtures.WithRetainFor(3*time.Second), declaredAt(strings.Repeat("b", 40)))
	var successorName string
	g.Eventually(func(g Gomega) {
		successorName = getBinding(t, g, namespace, old.Name).Status.SupersededBy
		g.Expect(successorName).NotTo(BeEmpty(), "the old binding is not handed over")
	}).Should(Succeed())
	waitForSuperseded(t, g, namespace, old.Name, successorName)
	successor := getBinding(t, g, namespace, successorName)
	g.Expect(successor.Spec.Supersedes).To(Equal(old.Name))
	g.Expect(successor.Spec.Resources.StorageName).To(Equal(old.Name))
	expectSameStatefulSet(t, g, sts)
}

// createdBinding waits for the one binding the server created to hold its
// reference, and returns it.
func createdBinding(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var binding embedopsv1.ModelCacheBinding
	g.Eventually(func(g Gomega) {
		var created embedopsv1.ModelCacheBindingList
		g.Expect(env.Client.List(t.Context(), &created, client.InNamespace(server.Namespace),
			client.MatchingLabels{embedopsv1.ServerUIDLabel: string(server.UID)})).To(Succeed())
		g.Expect(created.Items).To(HaveLen(1))
		binding = created.Items[0]
		g.Expect(binding.Status.RequestReferences).To(ContainElement(HaveField("UID", server.UID)))
	}).Should(Succeed())
	return &binding
}

// serverStatusRefused is a client whose EmbeddingServer status writes the
// API server refuses.
type serverStatusRefused struct{ client.Client }

// Status refuses EmbeddingServer status patches and passes the rest on.
func (c serverStatusRefused) Status() client.SubResourceWriter {
	return refusingStatusWriter{c.Client.Status()}
}

// refusingStatusWriter is serverStatusRefused's status writer.
type refusingStatusWriter struct{ client.SubResourceWriter }

// Patch refuses an EmbeddingServer's status.
func (w refusingStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, ok := obj.(*embedopsv1.EmbeddingServer); ok {
		return apierrors.NewForbidden(embedopsv1.GroupVersion.WithResource("embeddingservers/status").GroupResource(), obj.GetName(), errors.New("refused by the test"))
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}
