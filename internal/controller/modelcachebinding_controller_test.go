package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/harness"
)

func withStorageClass(name string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.StorageClassName = name }
}

func withRetainFor(d time.Duration) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.RetainFor = &metav1.Duration{Duration: d} }
}

// createStorageClass creates a cluster-wide StorageClass for the test.
func createStorageClass(t *testing.T, g *WithT, name, provisioner string) {
	t.Helper()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, Parameters: map[string]string{"type": name}}
	g.Expect(env.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
}

// getBinding reads a binding.
func getBinding(t *testing.T, g Gomega, namespace, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := &embedopsv1.ModelCacheBinding{}
	g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, binding)).To(Succeed())
	return binding
}

// listBindings lists the bindings of a namespace.
func listBindings(t *testing.T, g Gomega, namespace string) []embedopsv1.ModelCacheBinding {
	t.Helper()
	var bindings embedopsv1.ModelCacheBindingList
	g.Expect(env.Client.List(t.Context(), &bindings, client.InNamespace(namespace))).To(Succeed())
	return bindings.Items
}

// waitForBinding waits until the server uses a binding that references it,
// and returns the binding.
func waitForBinding(t *testing.T, g *WithT, key types.NamespacedName, not string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var binding *embedopsv1.ModelCacheBinding
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())
		g.Expect(server.Status.CacheBinding).NotTo(Equal(not))
		binding = getBinding(t, g, key.Namespace, server.Status.CacheBinding)
		g.Expect(hasReference(binding, server.UID)).To(BeTrue(), "%+v", binding.Status.RequestReferences)
	}).Should(Succeed())
	return binding
}

// createClaims plays the StatefulSet controller: it creates the claims with
// the server's labels.
func createClaims(t *testing.T, g *WithT, namespace, server string, names []string) {
	t.Helper()
	for _, name := range names {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
				embedopsv1.NameLabel: server, embedopsv1.NamespaceLabel: namespace,
			}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			},
		}
		g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
	}
}

// claimsGone plays the claim-protection controller, which envtest does not
// run, for claims being deleted, and reports whether all names are gone.
func claimsGone(t *testing.T, g Gomega, namespace string, names []string) bool {
	t.Helper()
	gone := true
	for _, name := range names {
		claim := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		gone = false
		if !claim.DeletionTimestamp.IsZero() && len(claim.Finalizers) > 0 {
			claim.Finalizers = nil
			g.Expect(client.IgnoreNotFound(env.Client.Update(t.Context(), claim))).To(Succeed())
		}
	}
	return gone
}

func TestStorageClassChangeRetiresTheOldBindingAfterRetainFor(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	createStorageClass(t, g, namespace+"-fast", "example.com/fast")
	createStorageClass(t, g, namespace+"-slow", "example.com/slow")
	startManager(t, namespace)
	key := createServer(t, g, embeddingServer(namespace, "tei", withReplicas(2), withRetainFor(time.Second), withStorageClass(namespace+"-fast")))

	old := waitForBinding(t, g, key, "")
	g.Expect(old.Spec.Decision.Provisioner).To(Equal("example.com/fast"))
	g.Expect(old.Spec.Source.Method).To(Equal(embedopsv1.SourceUnknown))
	g.Expect(old.Finalizers).To(ContainElement(embedopsv1.CacheProtectionFinalizer))
	claims := old.Spec.Resources.PersistentVolumeClaimNames
	g.Expect(claims).To(HaveLen(2))
	createClaims(t, g, namespace, "tei", claims)

	updateServer(t, g, key, withStorageClass(namespace+"-slow"))
	current := waitForBinding(t, g, key, old.Name)
	g.Expect(current.Spec.Decision.StorageClassName).To(Equal(namespace + "-slow"))

	g.Eventually(func(g Gomega) {
		gone := claimsGone(t, g, namespace, claims)
		b := getBinding(t, g, namespace, old.Name)
		g.Expect(b.Status.RequestReferences).To(BeEmpty())
		g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingReleased), "idle since %v", b.Status.IdleSince)
		g.Expect(gone).To(BeTrue())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, old.Name)
		g.Expect(b.Status.ReleasedAt).NotTo(BeNil())
		g.Expect(b.Finalizers).To(BeEmpty(), "a Released binding stays as a record without its finalizer")
		g.Expect(b.Status.RetireAfter.Sub(b.Status.IdleSince.Time)).To(Equal(time.Second))
	}).Should(Succeed())
	g.Expect(getBinding(t, g, namespace, current.Name).Status.Phase).To(Equal(embedopsv1.BindingActive))
}

func TestRevertedDecisionReusesTheIdleBinding(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, embeddingServer(namespace, "tei", withRetainFor(time.Hour), withStorageClass("a")))
	first := waitForBinding(t, g, key, "")

	updateServer(t, g, key, withStorageClass("b"))
	second := waitForBinding(t, g, key, first.Name)
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, first.Name)
		g.Expect(b.Status.RequestReferences).To(BeEmpty())
		g.Expect(b.Status.IdleSince).NotTo(BeNil())
	}).Should(Succeed())

	updateServer(t, g, key, withStorageClass("a"))
	reused := waitForBinding(t, g, key, second.Name)
	g.Expect(reused.Name).To(Equal(first.Name))
	g.Expect(reused.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, first.Name).Status.IdleSince).To(BeNil())
		g.Expect(getBinding(t, g, namespace, second.Name).Status.RequestReferences).To(BeEmpty())
	}).Should(Succeed())
	g.Expect(listBindings(t, g, namespace)).To(HaveLen(2))
}

// raceBinding creates an Active binding with zero references whose
// retireAfter has passed, and its claim.
func raceBinding(t *testing.T, g *WithT, c client.Client, namespace string, round int, d *decision.Decision) *embedopsv1.ModelCacheBinding {
	t.Helper()
	name := fmt.Sprintf("race-%d", round)
	binding := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Finalizers: []string{embedopsv1.CacheProtectionFinalizer}},
		Spec: embedopsv1.ModelCacheBindingSpec{
			Identity:  d.Identity,
			Decision:  d.Decision,
			Source:    embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: metav1.Now()},
			Resources: embedopsv1.CacheResources{PersistentVolumeClaimNames: []string{name}},
		},
	}
	g.Expect(c.Create(t.Context(), binding)).To(Succeed())
	past := metav1.NewTime(time.Now().Add(-time.Second))
	binding.Status = embedopsv1.ModelCacheBindingStatus{Phase: embedopsv1.BindingActive, IdleSince: &past, RetireAfter: &past}
	g.Expect(c.Status().Update(t.Context(), binding)).To(Succeed())
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: d.Decision.AccessModes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: d.Decision.Size}},
		},
	}
	g.Expect(c.Create(t.Context(), claim)).To(Succeed())
	return binding
}

// raceOutcome is one round of TestRetirementRacesWithANewReference.
type raceOutcome struct {
	added, retired bool
	violation      string
}

func TestRetirementRacesWithANewReference(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	recorder, err := events.NewRecorder(testr.New(t), "", "test", events.WithScheme(env.Scheme), events.WithLegacyEventRecorder(&record.FakeRecorder{}))
	g.Expect(err).NotTo(HaveOccurred())
	// Unthrottled, so the two writers meet at the API server, not in a
	// client-side rate limiter.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 10000, 10000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	r := newModelCacheBindingReconciler(c, c, recorder, ModelCacheBindingReconcilerOptions{})
	d := decisionOf(t, embeddingServer(namespace, "tei", withRetainFor(0)))

	const rounds = 200
	var added, retired, violations int
	for round := range rounds {
		outcome := raceRound(t, g, r, raceBinding(t, g, c, namespace, round, d), round%6)
		if outcome.added {
			added++
		}
		if outcome.retired {
			retired++
		}
		if outcome.violation != "" {
			violations++
			t.Errorf("round %d: %s", round, outcome.violation)
		}
	}
	t.Logf("rounds %d: reference added %d, retired %d, claims deleted while referenced %d", rounds, added, retired, violations)
	g.Expect(violations).To(BeZero())
	g.Expect(added+retired).To(Equal(rounds), "every round either adds the reference or retires")
}

// raceRound runs the retirement and a reference addition at once on a
// binding both read before. The adder first re-reads the binding reads
// times, as a server's reconcile reads before it writes, so either side may
// win. It then finishes the retirement and checks that a reference that was
// added kept its claim.
func raceRound(t *testing.T, g *WithT, r *ModelCacheBindingReconciler, created *embedopsv1.ModelCacheBinding, reads int) raceOutcome {
	t.Helper()
	key := client.ObjectKeyFromObject(created)
	read := func() *embedopsv1.ModelCacheBinding {
		binding := &embedopsv1.ModelCacheBinding{}
		g.Expect(r.client.Get(t.Context(), key, binding)).To(Succeed())
		return binding
	}
	forRetirement, forReference := read(), read()
	var outcome raceOutcome
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() {
		<-start
		_, _ = r.reconcileBinding(t.Context(), forRetirement)
	})
	wg.Go(func() {
		<-start
		binding := forReference
		for range reads {
			binding = &embedopsv1.ModelCacheBinding{}
			if r.client.Get(t.Context(), key, binding) != nil {
				return
			}
		}
		if !isActive(binding) {
			return
		}
		addReference(binding, embedopsv1.RequestReference{Kind: embedopsv1.EmbeddingServerKind, Namespace: key.Namespace, Name: "user", UID: types.UID("user-" + key.Name)})
		outcome.added = r.client.Status().Update(t.Context(), binding) == nil
	})
	close(start)
	wg.Wait()

	// The next reconcile, from a fresh read, finishes what was started.
	_, err := r.reconcileBinding(t.Context(), read())
	g.Expect(err).NotTo(HaveOccurred())
	after := read()
	outcome.retired = after.Status.Phase != embedopsv1.BindingActive
	claim := &corev1.PersistentVolumeClaim{}
	claimErr := r.client.Get(t.Context(), key, claim)
	switch {
	case !outcome.added:
	case outcome.retired:
		outcome.violation = fmt.Sprintf("the reference was added but the binding is %s", after.Status.Phase)
	case claimErr != nil || !claim.DeletionTimestamp.IsZero():
		outcome.violation = fmt.Sprintf("the reference was added but the claim was deleted: %v", claimErr)
	}
	return outcome
}
