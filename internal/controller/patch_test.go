package controller

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// statusPatchCounter counts the status patches sent through it.
type statusPatchCounter struct {
	client.Client
	patches *int
}

func (c statusPatchCounter) Status() client.SubResourceWriter {
	return countingStatusWriter{SubResourceWriter: c.Client.Status(), patches: c.patches}
}

type countingStatusWriter struct {
	client.SubResourceWriter
	patches *int
}

func (w countingStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	*w.patches++
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// One observation is one status patch, conditions and the rest together,
// and a new finalizer a metadata patch after it.
func TestServerPatcherWritesTheStatusInOnePatch(t *testing.T) {
	t.Parallel()
	g, key, server, patcher, patches := patchedServer(t)

	conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.InitializingReason, "0/1 replicas ready")
	server.Status.Phase = embedopsv1.PhasePending
	controllerutil.AddFinalizer(server, embedopsv1.ServerFinalizer)
	g.Expect(patcher.Patch(t.Context(), server, patchOptions{observedGeneration: true})).To(Succeed())

	g.Expect(*patches).To(Equal(1))
	written := getServer(t, g, key)
	g.Expect(written.Status.Phase).To(Equal(embedopsv1.PhasePending))
	g.Expect(written.Status.ObservedGeneration).To(Equal(written.Generation))
	g.Expect(conditions.GetReason(written, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.InitializingReason))
	g.Expect(written.Finalizers).To(ContainElement(embedopsv1.ServerFinalizer))
}

// A server written by someone else since the reconcile read it is patched
// as fluxcd's patcher does: the owned conditions merged into the latest
// copy, another writer's condition kept.
func TestServerPatcherMergesIntoTheLatestServerAfterAConflict(t *testing.T) {
	t.Parallel()
	g, key, server, patcher, patches := patchedServer(t)

	other := getServer(t, g, key)
	conditions.Set(other, &metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "Elsewhere", Message: "set by another writer"})
	g.Expect(env.Client.Status().Update(t.Context(), other)).To(Succeed())

	conditions.MarkTrue(server, embedopsv1.ReadyCondition, embedopsv1.AvailableReason, "1/1 replicas ready")
	server.Status.Phase = embedopsv1.PhaseReady
	g.Expect(patcher.Patch(t.Context(), server, patchOptions{observedGeneration: true})).To(Succeed())

	g.Expect(*patches).To(BeNumerically(">", 1), "the locked patch conflicted, the fallback patched again")
	written := getServer(t, g, key)
	g.Expect(written.Status.Phase).To(Equal(embedopsv1.PhaseReady))
	g.Expect(written.Status.ObservedGeneration).To(Equal(written.Generation))
	g.Expect(conditions.IsTrue(written, embedopsv1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.Get(written, "Other")).NotTo(BeNil(), "another writer's condition is kept")
}

// patchedServer creates a server in a namespace of its own and returns it
// with a patcher whose status patches are counted.
func patchedServer(t *testing.T) (*WithT, types.NamespacedName, *embedopsv1.EmbeddingServer, *serverPatcher, *int) {
	t.Helper()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	server := getServer(t, g, key)
	patches := new(int)
	return g, key, server, newServerPatcher(server, statusPatchCounter{Client: env.Client, patches: patches}), patches
}
