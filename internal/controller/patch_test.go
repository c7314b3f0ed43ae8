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
	"github.com/embedops/embedops/internal/controller/act"
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
	g.Expect(patcher.Patch(t.Context(), server, act.PatchOptions{ObservedGeneration: true})).To(Succeed())

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
	g.Expect(patcher.Patch(t.Context(), server, act.PatchOptions{ObservedGeneration: true})).To(Succeed())

	g.Expect(*patches).To(BeNumerically(">", 1), "the locked patch conflicted, the fallback patched again")
	written := getServer(t, g, key)
	g.Expect(written.Status.Phase).To(Equal(embedopsv1.PhaseReady))
	g.Expect(written.Status.ObservedGeneration).To(Equal(written.Generation))
	g.Expect(conditions.IsTrue(written, embedopsv1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.Get(written, "Other")).NotTo(BeNil(), "another writer's condition is kept")
}

// patchedServer creates a server in a namespace of its own and returns it
// with a patcher whose status patches are counted.
func patchedServer(t *testing.T) (*WithT, types.NamespacedName, *embedopsv1.EmbeddingServer, *act.ServerPatcher, *int) {
	t.Helper()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	server := getServer(t, g, key)
	patches := new(int)
	return g, key, server, act.NewServerPatcher(server, statusPatchCounter{Client: env.Client, patches: patches}, nil, ownedConditions), patches
}

// foreignFinalizer is another controller's finalizer on a server.
const foreignFinalizer = "example.com/keep"

// deletedWithForeignFinalizer creates a server holding embedops' finalizer
// and foreignFinalizer and deletes it with Foreground propagation, as Argo
// CD's cascade does: the API server adds foregroundDeletion. It returns the
// server as read then, the copy a reconcile would start from.
func deletedWithForeignFinalizer(t *testing.T, g *WithT) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := fixtures.EmbeddingServer(harness.Namespace(t, env.Client), "tei")
	server.Finalizers = []string{embedopsv1.ServerFinalizer, foreignFinalizer}
	g.Expect(env.Client.Create(t.Context(), server)).To(Succeed())
	g.Expect(env.Client.Delete(t.Context(), server, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	read := &embedopsv1.EmbeddingServer{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(server), read)).To(Succeed())
	g.Expect(read.Finalizers).To(Equal([]string{embedopsv1.ServerFinalizer, foreignFinalizer, metav1.FinalizerDeleteDependents}))
	t.Cleanup(func() {
		live := &embedopsv1.EmbeddingServer{}
		if env.Client.Get(context.Background(), client.ObjectKeyFromObject(server), live) == nil {
			live.Finalizers = nil
			_ = env.Client.Update(context.Background(), live)
		}
	})
	return read
}

// setFinalizers writes the server's finalizers as another party would.
func setFinalizers(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer, finalizers ...string) {
	t.Helper()
	live := &embedopsv1.EmbeddingServer{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(server), live)).To(Succeed())
	live.Finalizers = finalizers
	g.Expect(env.Client.Update(t.Context(), live)).To(Succeed())
}

// The garbage collector removes foregroundDeletion once the dependents are
// gone, maybe after the reconcile read the server: removing embedops'
// finalizer must not put it back, which the API server would refuse.
func TestRemovingTheFinalizerAfterTheGarbageCollectorDoesNotRestoreForegroundDeletion(t *testing.T) {
	t.Parallel()
	g := newG(t)
	read := deletedWithForeignFinalizer(t, g)
	patcher := act.NewServerPatcher(read, env.Client, nil, ownedConditions)
	setFinalizers(t, g, read, embedopsv1.ServerFinalizer, foreignFinalizer)

	controllerutil.RemoveFinalizer(read, embedopsv1.ServerFinalizer)
	g.Expect(patcher.Patch(t.Context(), read, act.PatchOptions{})).To(Succeed())
	g.Expect(getServer(t, g, client.ObjectKeyFromObject(read)).Finalizers).To(Equal([]string{foreignFinalizer}))
}

// A finalizer another controller removes after the reconcile read the
// server is not put back when embedops' own goes (the API server would
// refuse it as a new finalizer on an object being deleted), nor is the
// order the others left kept from being the reconcile's.
func TestRemovingTheFinalizerDoesNotPutBackOneRemovedSince(t *testing.T) {
	t.Parallel()
	g := newG(t)
	read := deletedWithForeignFinalizer(t, g)
	patcher := act.NewServerPatcher(read, env.Client, env.Client, ownedConditions)
	setFinalizers(t, g, read, metav1.FinalizerDeleteDependents, embedopsv1.ServerFinalizer)

	controllerutil.RemoveFinalizer(read, embedopsv1.ServerFinalizer)
	g.Expect(patcher.Patch(t.Context(), read, act.PatchOptions{})).To(Succeed(), "the entry moved: the removal reads the server again")
	g.Expect(getServer(t, g, client.ObjectKeyFromObject(read)).Finalizers).To(Equal([]string{metav1.FinalizerDeleteDependents}))
}
