package controller

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// claimsFromTemplate plays the StatefulSet controller: it creates the
// claims of the StatefulSet's first claim template, with its labels and no
// owner, and returns their UIDs by name.
func claimsFromTemplate(t *testing.T, g *WithT, sts *appsv1.StatefulSet, names []string) map[string]types.UID {
	t.Helper()
	template := sts.Spec.VolumeClaimTemplates[0]
	uids := map[string]types.UID{}
	for _, name := range names {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: name, Labels: template.Labels},
			Spec:       template.Spec,
		}
		g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
		uids[name] = claim.UID
	}
	return uids
}

// expectClaimsKept fails unless every claim exists with its UID and is not
// being deleted.
func expectClaimsKept(t *testing.T, g Gomega, namespace string, uids map[string]types.UID) {
	t.Helper()
	for name, uid := range uids {
		claim := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, claim)).To(Succeed())
		g.Expect(claim.UID).To(Equal(uid), "claim %s was made again", name)
		g.Expect(claim.DeletionTimestamp).To(BeNil(), "claim %s is being deleted", name)
	}
}

// expectSameStatefulSet fails unless the server's StatefulSet is before, at
// its generation, with the same pod labels and claim templates: nothing
// replaced it and no pod is rolled.
func expectSameStatefulSet(t *testing.T, g Gomega, before *appsv1.StatefulSet) {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(before), sts)).To(Succeed())
	g.Expect(sts.UID).To(Equal(before.UID), "the StatefulSet was replaced")
	g.Expect(sts.Generation).To(Equal(before.Generation), "the StatefulSet changed")
	g.Expect(sts.Spec.Template.Labels).To(Equal(before.Spec.Template.Labels))
	g.Expect(sts.Spec.VolumeClaimTemplates).To(Equal(before.Spec.VolumeClaimTemplates))
}

// waitForSuperseded waits until the binding is Released as Superseded by
// successor, with its event.
func waitForSuperseded(t *testing.T, g *WithT, namespace, name, successor string) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, name)
		g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingReleased))
		g.Expect(b.Status.SupersededBy).To(Equal(successor))
		g.Expect(b.Status.RequestReferences).To(BeEmpty())
		g.Expect(b.Status.Conditions).To(ContainElement(And(HaveField("Type", embedopsv1.ReadyCondition),
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", embedopsv1.SupersededReason))))
		g.Expect(bindingEventReasons(t, g, namespace, name)).To(ContainElement(embedopsv1.SupersededReason))
	}).Should(Succeed())
}

// declaredAt declares the git commit a server's manifest was applied from.
func declaredAt(commit string) fixtures.Option {
	return fixtures.WithAnnotations(map[string]string{embedopsv1.SourceRevisionAnnotation: "main@sha1:" + commit})
}

func TestRetainForChangeKeepsTheStatefulSetAndTheClaims(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	commitA, commitB := strings.Repeat("a", 40), strings.Repeat("b", 40)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2), fixtures.WithRetainFor(time.Second), declaredAt(commitA)))
	old := waitForBinding(t, g, key, "")
	sts := waitForStatefulSet(t, g, key)
	claims := claimsFromTemplate(t, g, sts, old.Spec.Resources.PersistentVolumeClaimNames)
	g.Expect(claims).To(HaveLen(2))

	updateServer(t, g, key, fixtures.WithRetainFor(3*time.Second), declaredAt(commitB))
	successor := waitForBinding(t, g, key, old.Name)
	expectSameStatefulSet(t, g, sts)
	g.Expect(successor.Spec.Decision.RetainFor.Duration).To(Equal(3 * time.Second))
	g.Expect(successor.Spec.Decision.Digest).NotTo(Equal(old.Spec.Decision.Digest), "the new decision is recorded")
	g.Expect(successor.Spec.Source.Commit).To(Equal(commitB), "at the commit that made it")
	g.Expect(old.Spec.Source.Commit).To(Equal(commitA))

	// The old binding's retainFor (1s) ends: it deletes nothing.
	g.Consistently(func(g Gomega) {
		expectClaimsKept(t, g, namespace, claims)
		g.Expect(bindingEventReasons(t, g, namespace, old.Name)).NotTo(ContainElements(embedopsv1.RetiringReason, embedopsv1.ClaimDeletedReason))
	}).Should(Succeed())
	waitForSuperseded(t, g, namespace, old.Name, successor.Name)
	g.Expect(successor.Spec.Supersedes).To(Equal(old.Name))
	g.Expect(successor.Spec.Resources.StorageName).To(Equal(old.Name))
	g.Expect(successor.Spec.Resources.ClaimTemplateName).To(Equal(sts.Spec.VolumeClaimTemplates[0].Name))
	g.Expect(successor.Spec.Resources.PersistentVolumeClaimNames).To(ConsistOf(old.Spec.Resources.PersistentVolumeClaimNames))
	g.Expect(getBinding(t, g, namespace, successor.Name).Status.Phase).To(Equal(embedopsv1.BindingActive))
	expectSameStatefulSet(t, g, sts)

	// Deleting the server retires the successor after its own retainFor.
	g.Expect(env.Client.Delete(t.Context(), fixtures.EmbeddingServer(namespace, "tei"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		gone := claimsGone(t, g, namespace, old.Spec.Resources.PersistentVolumeClaimNames)
		g.Expect(getBinding(t, g, namespace, successor.Name).Status.Phase).To(Equal(embedopsv1.BindingReleased))
		g.Expect(gone).To(BeTrue())
	}).Should(Succeed())
	retired := getBinding(t, g, namespace, successor.Name)
	g.Expect(retired.Status.RetireAfter.Sub(retired.Status.IdleSince.Time)).To(Equal(3 * time.Second))
	g.Eventually(func(g Gomega) {
		g.Expect(bindingEventReasons(t, g, namespace, successor.Name)).To(ContainElements(embedopsv1.RetiringReason, embedopsv1.ClaimDeletedReason))
	}).Should(Succeed())
	g.Expect(getBinding(t, g, namespace, old.Name).Status.SupersededBy).To(Equal(successor.Name))
}

func TestSharedRetainForChainsKeepTheClaimPastPruning(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, func(opts *ManagerOptions) { opts.ModelCacheBinding.HistoryLimit = 1 })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithRetainFor(time.Second)))
	root := waitForBinding(t, g, key, "")
	sts := waitForStatefulSet(t, g, key)
	claim := &corev1.PersistentVolumeClaim{}
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: root.Name}, claim)
	}).Should(Succeed())

	updateServer(t, g, key, fixtures.WithRetainFor(2*time.Second))
	first := waitForBinding(t, g, key, root.Name)
	expectSameStatefulSet(t, g, sts)
	waitForSuperseded(t, g, namespace, root.Name, first.Name)
	updateServer(t, g, key, fixtures.WithRetainFor(3*time.Second))
	second := waitForBinding(t, g, key, first.Name)
	waitForSuperseded(t, g, namespace, first.Name, second.Name)

	g.Expect(second.Spec.Supersedes).To(Equal(first.Name))
	g.Expect(second.Spec.Resources.StorageName).To(Equal(root.Name), "a chain keeps the root's storage")
	g.Expect(second.Spec.Resources.PersistentVolumeClaimNames).To(ConsistOf(root.Name))
	expectSameStatefulSet(t, g, sts)
	g.Eventually(isNotFound(t, &embedopsv1.ModelCacheBinding{}, client.ObjectKeyFromObject(root))).Should(BeTrue(),
		"the history limit of 1 prunes the oldest Released record")
	// The garbage collector deletes what a pruned binding controls; the
	// claim is controlled by the binding that holds it.
	g.Eventually(func(g Gomega) {
		expectClaimsKept(t, g, namespace, map[string]types.UID{root.Name: claim.UID})
		live := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(claim), live)).To(Succeed())
		g.Expect(live.OwnerReferences).To(ConsistOf(And(HaveField("UID", second.UID), HaveField("Controller", HaveValue(BeTrue())))))
	}).Should(Succeed())
	g.Expect(getBinding(t, g, namespace, second.Name).Status.Phase).To(Equal(embedopsv1.BindingActive))
}

func TestRetainForChangeOfASharedBindingInUseElsewhereGetsItsOwnStorage(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	playStatefulSetController(t, namespace)
	shared := []fixtures.Option{fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithRetainFor(time.Hour)}
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", shared...))
	other := createServer(t, g, fixtures.EmbeddingServer(namespace, "b", shared...))
	binding := waitForBinding(t, g, key, "")
	g.Expect(waitForBinding(t, g, other, "").Name).To(Equal(binding.Name))

	updateServer(t, g, key, fixtures.WithRetainFor(2*time.Hour))
	own := waitForBinding(t, g, key, binding.Name)
	g.Expect(own.Spec.Supersedes).To(BeEmpty())
	g.Expect(decision.StorageName(own)).To(Equal(own.Name))
	g.Eventually(func(g Gomega) {
		b := getBinding(t, g, namespace, binding.Name)
		g.Expect(b.Status.Phase).To(Equal(embedopsv1.BindingActive))
		g.Expect(b.Status.SupersededBy).To(BeEmpty())
		g.Expect(b.Status.RequestReferences).To(ConsistOf(HaveField("Name", "b")))
	}).Should(Succeed())
}
