package controller

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// A new server leaves the first reference of the PerReplica binding it
// created unwritten until the binding's claims are Bound, and then writes
// the binding's first status once, Ready=True; the binding controller then
// finds nothing to write.
func TestANewServerReferencesItsBindingOnceItsClaimsAreBound(t *testing.T) {
	t.Parallel()
	g := newG(t)
	server, l, c, bound := awaitingBinding(t, g, ledger.CreatorGrace/2)
	namespace := server.Namespace
	d, err := decision.For(server)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readBinding(t, g, c, bound.Binding).Status).To(Equal(embedopsv1.ModelCacheBindingStatus{}), "no status while the claim is not made")

	claims := bound.Binding.Spec.Resources.PersistentVolumeClaimNames
	g.Expect(claims).To(HaveLen(1))
	claim := cacheClaim(namespace, claims[0])
	g.Expect(c.Create(t.Context(), claim)).To(Succeed())
	again, err := l.Bind(t.Context(), server, d, unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.ReferenceWait).To(BeNumerically(">", 0), "a Pending claim is waited for")
	g.Expect(readBinding(t, g, c, bound.Binding).Status.Phase).To(BeEmpty())

	setClaimPhase(t, g, claim, corev1.ClaimBound)
	g.Eventually(func(g Gomega) {
		again, err := l.Bind(t.Context(), server, d, unknownSource)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.ReferenceWait).To(BeZero())
	}).Should(Succeed(), "the reference is written once the cache shows the claim Bound")
	written := readBinding(t, g, c, bound.Binding)
	g.Expect(written.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(decision.HasReference(written, server.UID)).To(BeTrue())
	g.Expect(conditions.IsTrue(written, embedopsv1.ReadyCondition)).To(BeTrue(), "the first status is the Ready one")
	g.Expect(conditions.GetReason(written, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.BoundReason))

	g.Eventually(func(g Gomega) {
		_, err := l.Advance(t.Context(), readBinding(t, g, c, bound.Binding))
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())
	g.Expect(readBinding(t, g, c, bound.Binding).ResourceVersion).To(Equal(written.ResourceVersion), "the binding controller writes nothing more")
}

// A new server that waits for its claims to bind before it references its
// binding looks again every progress interval, also once it is Ready. Its
// pods' scheduling usually wakes it, but the pods' events and the claim's
// come through different watches: when all of the pods' come first, the
// cache still shows the claim Pending, and nothing else wakes a Ready
// server before the wait ends (make bench saw one server of 200 wait out
// the 5 minutes).
func TestAReadyServerWaitingForItsClaimsLooksAgainEveryProgressInterval(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, func(o *ManagerOptions) {
		o.EmbeddingServer.ProgressInterval = time.Second
		o.ModelCacheBinding.FirstReferenceWait = time.Hour
	})
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	sts := waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	bindings := listBindings(t, g, namespace)
	g.Expect(bindings).To(HaveLen(1))
	waiting := bindings[0]
	g.Expect(waiting.Status.Phase).To(BeEmpty(), "the first reference waits for the claim")

	for name := range claimsFromTemplate(t, g, sts, waiting.Spec.Resources.PersistentVolumeClaimNames) {
		setClaimPhase(t, g, cacheClaim(namespace, name), corev1.ClaimBound)
	}
	server := getServer(t, g, key)
	g.Eventually(func(g Gomega) {
		binding := getBinding(t, g, namespace, waiting.Name)
		g.Expect(decision.HasReference(binding, server.UID)).To(BeTrue())
		g.Expect(conditions.GetReason(binding, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.BoundReason))
	}).Should(Succeed(), "the server looks again long before the wait ends")
}

// Past the wait, or for a binding whose claim the binding controller makes
// (Shared), the first reference is written at once, with the claims as
// they are.
func TestTheFirstReferenceIsWrittenAtOncePastTheWaitOrForASharedBinding(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		options []fixtures.Option
		now     func() time.Time
	}{
		"past the wait": {now: func() time.Time { return time.Now().Add(ledger.CreatorGrace/2 + time.Second) }},
		"Shared":        {options: []fixtures.Option{fixtures.WithCacheMode(embedopsv1.CacheModeShared)}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			namespace := harness.Namespace(t, env.Client)
			server := liveServer(t, g, env.Client, namespace, "tei", tc.options...)
			d, err := decision.For(server)
			g.Expect(err).NotTo(HaveOccurred())
			l, c := newTestLedger(t, g, nil, ledger.Options{FirstReferenceWait: ledger.CreatorGrace / 2, Now: tc.now})

			bound, err := l.Bind(t.Context(), server, d, unknownSource)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bound.ReferenceWait).To(BeZero())
			written := readBinding(t, g, c, bound.Binding)
			g.Expect(decision.HasReference(written, server.UID)).To(BeTrue())
			g.Expect(conditions.GetReason(written, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.PendingReason))
		})
	}
}

// cacheClaim is a claim as the StatefulSet controller makes one from a
// cache claim template, before any provisioner saw it.
func cacheClaim(namespace, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
}

// A binding whose creator still waits for its claims is left to it past
// CreatorGrace; once the creator is gone, the binding controller takes it as
// Active, unreferenced and idle. A creator that leaves the binding itself
// (deleted, or on another decision) writes that status at once.
func TestABindingAwaitingItsCreatorIsLeftToItWhileTheCreatorExists(t *testing.T) {
	t.Parallel()
	g := newG(t)
	wait := 10 * ledger.CreatorGrace
	server, l, c, bound := awaitingBinding(t, g, wait)

	past := func() time.Time { return time.Now().Add(2 * ledger.CreatorGrace) }
	later, _ := newTestLedger(t, g, nil, ledger.Options{FirstReferenceWait: wait, Now: past})
	result, err := later.Advance(t.Context(), readBinding(t, g, c, bound.Binding))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.RequeueAfter).To(BeNumerically(">=", ledger.CreatorGrace), "it looks again in a grace")
	g.Expect(readBinding(t, g, c, bound.Binding).Status.Phase).To(BeEmpty(), "left to its creator")

	g.Expect(l.Leave(t.Context(), server, "")).To(Succeed())
	left := readBinding(t, g, c, bound.Binding)
	g.Expect(left.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(left.Status.RequestReferences).To(BeEmpty())
	g.Expect(left.Status.IdleSince).NotTo(BeNil(), "idle from now on, so it retires after retainFor")
	g.Expect(conditions.GetReason(left, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.PendingReason))
}

// A creator that is gone without leaving (its finalizer stripped) no longer
// holds the binding past CreatorGrace.
func TestABindingAwaitingACreatorThatIsGoneIsTakenAfterTheGrace(t *testing.T) {
	t.Parallel()
	g := newG(t)
	wait := 10 * ledger.CreatorGrace
	server, _, c, bound := awaitingBinding(t, g, wait)
	server.Finalizers = nil
	g.Expect(c.Update(t.Context(), server)).To(Succeed())
	g.Expect(c.Delete(t.Context(), server)).To(Succeed())

	later, _ := newTestLedger(t, g, nil, ledger.Options{FirstReferenceWait: wait, Now: func() time.Time { return time.Now().Add(2 * ledger.CreatorGrace) }})
	_, err := later.Advance(t.Context(), readBinding(t, g, c, bound.Binding))
	g.Expect(err).NotTo(HaveOccurred())
	taken := readBinding(t, g, c, bound.Binding)
	g.Expect(taken.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(taken.Status.RequestReferences).To(BeEmpty())
	g.Expect(taken.Status.IdleSince).NotTo(BeNil())
}

// A retainFor edit while the first reference waits takes the storage over,
// as it does once the server references its binding: the server references
// the waiting binding at once, and the successor supersedes it.
func TestARetainForEditDuringTheWaitTakesTheStorageOver(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	l, c := newTestLedger(t, g, nil, ledger.Options{FirstReferenceWait: ledger.CreatorGrace})
	server := liveServer(t, g, c, namespace, "tei", fixtures.WithRetainFor(time.Minute))
	first, err := l.Bind(t.Context(), server, withRetainFor(t, g, server, time.Minute), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.ReferenceWait).To(BeNumerically(">", 0))
	server.Status.CacheBinding = first.Binding.Name

	bound, err := l.Bind(t.Context(), server, withRetainFor(t, g, server, 0), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bound.Binding.Spec.Supersedes).To(Equal(first.Binding.Name), "the successor takes the storage over")
	g.Expect(decision.StorageName(bound.Binding)).To(Equal(decision.StorageName(first.Binding)))
}

// The ledger chooses from reads and writes afterwards. A waiting binding in
// use is owed its first reference before anything is handed over: the
// ledger writes it, then chooses again from what the write left. A
// PerReplica binding's identity is its server's, so only its creator
// references it; but when another reference reaches it before the first
// reference is written (a hand edit, a writer with a bug), the storage is
// no longer this server's alone, and the new decision gets storage of its
// own in the same Bind.
func TestAReferenceAddedBeforeTheFirstReferenceStopsTheHandOver(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	var first *embedopsv1.ModelCacheBinding
	var otherServer *embedopsv1.EmbeddingServer
	var raced bool
	referenceFirst := func(ctx context.Context, status client.SubResourceWriter, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		if first != nil && obj.GetName() == first.Name && !raced {
			raced = true
			another := readBinding(t, g, env.Client, first)
			another.Status.Phase = embedopsv1.BindingActive
			decision.AddReference(another, decision.ServerReference(otherServer))
			g.Expect(env.Client.Status().Update(ctx, another)).To(Succeed())
		}
		return status.Update(ctx, obj, opts...)
	}
	l, c := newTestLedger(t, g, func(c client.Client) client.Client {
		return statusUpdateHook{Client: c, update: referenceFirst}
	}, ledger.Options{FirstReferenceWait: ledger.CreatorGrace})
	server := liveServer(t, g, c, namespace, "tei", fixtures.WithRetainFor(time.Minute))
	otherServer = liveServer(t, g, c, namespace, "other", fixtures.WithRetainFor(time.Minute))
	bound, err := l.Bind(t.Context(), server, withRetainFor(t, g, server, time.Minute), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bound.ReferenceWait).To(BeNumerically(">", 0))
	first = bound.Binding
	server.Status.CacheBinding = first.Name

	bound, err = l.Bind(t.Context(), server, withRetainFor(t, g, server, 0), unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raced).To(BeTrue())
	g.Expect(readBinding(t, g, c, first).Status.SupersededBy).To(BeEmpty(), "the shared storage is not handed over")
	g.Expect(readBinding(t, g, c, first).Status.RequestReferences).To(HaveLen(2), "the first reference is written")
	g.Expect(bound.Binding.Spec.Supersedes).To(BeEmpty(), "the decision gets storage of its own")
	g.Expect(decision.StorageName(bound.Binding)).NotTo(Equal(decision.StorageName(first)))
}

// statusUpdateHook is a client whose status updates go through update,
// which receives the client's own status writer. controller-runtime's
// interceptor package does the same for a client.WithWatch, which the
// ledger's cached client is not.
type statusUpdateHook struct {
	client.Client
	update func(ctx context.Context, status client.SubResourceWriter, obj client.Object, opts ...client.SubResourceUpdateOption) error
}

func (h statusUpdateHook) Status() client.SubResourceWriter {
	return hookedStatusWriter{SubResourceWriter: h.Client.Status(), update: h.update}
}

// hookedStatusWriter is statusUpdateHook's status writer.
type hookedStatusWriter struct {
	client.SubResourceWriter
	update func(ctx context.Context, status client.SubResourceWriter, obj client.Object, opts ...client.SubResourceUpdateOption) error
}

func (w hookedStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return w.update(ctx, w.SubResourceWriter, obj, opts...)
}

// awaitingBinding creates a live server and binds it with a ledger whose
// first references wait up to wait: the new binding waits for its claims.
func awaitingBinding(t *testing.T, g *WithT, wait time.Duration) (*embedopsv1.EmbeddingServer, *ledger.Ledger, client.Client, ledger.Bound) {
	t.Helper()
	server := liveServer(t, g, env.Client, harness.Namespace(t, env.Client), "tei")
	d, err := decision.For(server)
	g.Expect(err).NotTo(HaveOccurred())
	l, c := newTestLedger(t, g, nil, ledger.Options{FirstReferenceWait: wait})
	bound, err := l.Bind(t.Context(), server, d, unknownSource)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bound.Created).To(BeTrue())
	g.Expect(bound.ReferenceWait).To(And(BeNumerically(">", 0), BeNumerically("<=", wait)))
	return server, l, c, bound
}
