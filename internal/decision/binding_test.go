package decision_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

// bindingOption changes a test binding.
type bindingOption func(*embedopsv1.ModelCacheBinding)

// testBinding is a binding with retainFor of a minute.
func testBinding(options ...bindingOption) *embedopsv1.ModelCacheBinding {
	b := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: metav1.NewTime(time.Unix(0, 0))},
		Spec: embedopsv1.ModelCacheBindingSpec{Decision: embedopsv1.CacheDecision{
			Size: resource.MustParse("10Gi"), RetainFor: metav1.Duration{Duration: time.Minute},
		}},
	}
	for _, option := range options {
		option(b)
	}
	return b
}

func withReference(uid types.UID) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) {
		b.Status.RequestReferences = append(b.Status.RequestReferences, embedopsv1.RequestReference{Kind: "EmbeddingServer", Name: string(uid), UID: uid})
	}
}

func withIdle(since, retireAfter time.Time) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) {
		b.Status.IdleSince, b.Status.RetireAfter = &metav1.Time{Time: since}, &metav1.Time{Time: retireAfter}
	}
}

func withDeletion(at time.Time) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) { b.DeletionTimestamp = &metav1.Time{Time: at} }
}

func withPhase(phase embedopsv1.BindingPhase) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) { b.Status.Phase = phase }
}

func TestActiveActionFollowsReferencesAndTime(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name    string
		binding *embedopsv1.ModelCacheBinding
		want    decision.IdleAction
	}{
		{"referenced", testBinding(withReference("a")), decision.StayActive},
		{"referenced again while idle", testBinding(withReference("a"), withIdle(now, now.Add(time.Minute))), decision.EndIdle},
		{"no references, no window", testBinding(), decision.StartIdle},
		{"idle, before retireAfter", testBinding(withIdle(now, now.Add(time.Second))), decision.WaitIdle},
		{"idle, at retireAfter", testBinding(withIdle(now.Add(-time.Minute), now)), decision.RetireNow},
		{"idle, past retireAfter", testBinding(withIdle(now.Add(-time.Hour), now.Add(-time.Minute))), decision.RetireNow},
		{"deleted, unreferenced, no window", testBinding(withDeletion(now)), decision.RetireNow},
		{"deleted, unreferenced, within retainFor", testBinding(withDeletion(now), withIdle(now, now.Add(time.Hour))), decision.RetireNow},
		{"deleted, still referenced", testBinding(withDeletion(now), withReference("a")), decision.StayActive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decision.ActiveAction(tc.binding, now)).To(Equal(tc.want))
		})
	}
}

func TestMarkIdleWindow(t *testing.T) {
	now := time.Unix(10, 0)
	t.Run("retireAfter is idleSince plus retainFor", func(t *testing.T) {
		g := NewWithT(t)
		b := testBinding()
		decision.MarkIdle(b, now, false)
		g.Expect(b.Status.IdleSince.Time).To(Equal(now))
		g.Expect(b.Status.RetireAfter.Time).To(Equal(now.Add(time.Minute)))
	})
	t.Run("a never referenced binding keeps its creation grace", func(t *testing.T) {
		g := NewWithT(t)
		b := testBinding(func(b *embedopsv1.ModelCacheBinding) { b.Spec.Decision.RetainFor.Duration = 0 })
		decision.MarkIdle(b, now, true)
		g.Expect(b.Status.RetireAfter.Time).To(Equal(time.Unix(0, 0).Add(decision.NewBindingGrace)))
	})
	t.Run("the last removal starts the window, earlier ones do not", func(t *testing.T) {
		g := NewWithT(t)
		b := testBinding(withReference("a"), withReference("b"))
		decision.RemoveReference(b, "a", now)
		g.Expect(b.Status.IdleSince).To(BeNil())
		decision.RemoveReference(b, "b", now)
		g.Expect(b.Status.RequestReferences).To(BeEmpty())
		g.Expect(b.Status.RetireAfter.Time).To(Equal(now.Add(time.Minute)))
		decision.AddReference(b, embedopsv1.RequestReference{UID: "c"})
		g.Expect(b.Status.IdleSince).To(BeNil())
		g.Expect(b.Status.RetireAfter).To(BeNil())
		g.Expect(decision.HasReference(b, "c")).To(BeTrue())
	})
}

func TestReusableOnlyWhenActiveWithTheSameDecision(t *testing.T) {
	d := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithDefaults()))
	other := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithCacheSize("20Gi"), fixtures.WithDefaults()))
	recorded := func(phase embedopsv1.BindingPhase) *embedopsv1.ModelCacheBinding {
		return testBinding(withPhase(phase), func(b *embedopsv1.ModelCacheBinding) {
			b.Spec.Identity, b.Spec.Decision = d.Identity, d.Decision
		})
	}
	g := NewWithT(t)
	g.Expect(decision.Reusable(recorded(""), d)).To(BeTrue())
	g.Expect(decision.Reusable(recorded(embedopsv1.BindingActive), d)).To(BeTrue())
	g.Expect(decision.Reusable(recorded(embedopsv1.BindingRetiring), d)).To(BeFalse())
	g.Expect(decision.Reusable(recorded(embedopsv1.BindingReleased), d)).To(BeFalse())
	g.Expect(decision.Reusable(recorded(embedopsv1.BindingActive), other)).To(BeFalse())
}

func TestBindingNamesAndClaimNames(t *testing.T) {
	g := NewWithT(t)
	d := decisionOf(t, fixtures.EmbeddingServer("models", "tei", fixtures.WithDefaults()))
	base := decision.BindingName(d)
	g.Expect(decision.BindingNameAt(base, 1)).To(Equal(base))
	g.Expect(decision.BindingNameAt(base, 3)).To(Equal(base + "-3"))
	g.Expect(decision.BindingSuffix(base, base)).To(Equal(1))
	g.Expect(decision.BindingSuffix(base, base+"-3")).To(Equal(3))
	g.Expect(decision.BindingSuffix(base, base+"-03")).To(BeZero())
	g.Expect(decision.BindingSuffix(base, base+"-x")).To(BeZero())
	g.Expect(decision.BindingSuffix(base, "other")).To(BeZero())
	template := decision.ClaimTemplateName(d)
	g.Expect(decision.PerReplicaClaimNames(template, "tei", 2)).To(Equal([]string{template + "-tei-0", template + "-tei-1"}))
	g.Expect(decision.PerReplicaClaimNames(template, "tei", 0)).To(BeEmpty())
	g.Expect(decision.MissingNames([]string{"a", "b"}, []string{"a", "b", "c"})).To(Equal([]string{"c"}))
	g.Expect(decision.MissingNames([]string{"a", "b", "c"}, []string{"a"})).To(BeEmpty())
}

func TestPrunableKeepsTheNewestReleased(t *testing.T) {
	g := NewWithT(t)
	released := func(name string, at int64) embedopsv1.ModelCacheBinding {
		b := testBinding(withPhase(embedopsv1.BindingReleased), func(b *embedopsv1.ModelCacheBinding) {
			b.Name, b.Status.ReleasedAt = name, &metav1.Time{Time: time.Unix(at, 0)}
		})
		return *b
	}
	bindings := []embedopsv1.ModelCacheBinding{released("c", 3), released("a", 1), *testBinding(), released("b", 2)}
	g.Expect(decision.Prunable(bindings, 3)).To(BeEmpty())
	pruned := decision.Prunable(bindings, 1)
	g.Expect(pruned).To(HaveLen(2))
	g.Expect(pruned[0].Name).To(Equal("a"))
	g.Expect(pruned[1].Name).To(Equal("b"))

	// Released within one second: the later write is the newer record,
	// compared as a number ("10" is after "9").
	sameSecond := func(name, resourceVersion string) embedopsv1.ModelCacheBinding {
		b := released(name, 5)
		b.ResourceVersion = resourceVersion
		return b
	}
	tied := []embedopsv1.ModelCacheBinding{sameSecond("newest", "10"), sameSecond("older", "9"), sameSecond("oldest", "8")}
	g.Expect(decision.Prunable(tied, 1)).To(HaveExactElements(HaveField("Name", "oldest"), HaveField("Name", "older")))
}

func TestDrift(t *testing.T) {
	recorded := testBinding(func(b *embedopsv1.ModelCacheBinding) {
		b.Spec.Decision.Provisioner = "csi.a"
		b.Spec.Decision.StorageClassParametersDigest = decision.ParametersDigest(map[string]string{"type": "ssd"})
	})
	claim := func(size string) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		}}
	}
	g := NewWithT(t)
	g.Expect(decision.StorageClassDrift(recorded, &decision.StorageClass{Provisioner: "csi.a", Parameters: map[string]string{"type": "ssd"}})).To(BeNil())
	g.Expect(reasonOf(decision.StorageClassDrift(recorded, &decision.StorageClass{Provisioner: "csi.b", Parameters: map[string]string{"type": "ssd"}}))).To(Equal(embedopsv1.StorageClassDriftReason))
	g.Expect(reasonOf(decision.StorageClassDrift(recorded, &decision.StorageClass{Provisioner: "csi.a", Parameters: map[string]string{"type": "hdd"}}))).To(Equal(embedopsv1.StorageClassDriftReason))
	g.Expect(decision.StorageClassDrift(testBinding(), &decision.StorageClass{Provisioner: "csi.b", Parameters: nil})).To(BeNil(), "facts that were not recorded cannot drift")
	g.Expect(reasonOf(decision.StorageClassDrift(recorded, nil))).To(Equal(embedopsv1.StorageClassDeletedReason), "a deleted class is drift")
	g.Expect(decision.StorageClassDrift(testBinding(), nil)).To(BeNil(), "no class was recorded, none is missing")
	g.Expect(decision.ClaimSizeDrift(recorded, []corev1.PersistentVolumeClaim{claim("10Gi")})).To(BeNil())
	g.Expect(reasonOf(decision.ClaimSizeDrift(recorded, []corev1.PersistentVolumeClaim{claim("20Gi")}))).To(Equal(embedopsv1.ClaimResizedReason))
}

func TestCacheReadiness(t *testing.T) {
	bound := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pending := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	withClaims := func(b *embedopsv1.ModelCacheBinding) {
		b.Spec.Resources.PersistentVolumeClaimNames = []string{"x", "y"}
	}
	cases := []struct {
		name    string
		binding *embedopsv1.ModelCacheBinding
		claims  map[string]*corev1.PersistentVolumeClaim
		ready   bool
		reason  string
	}{
		{"all bound", testBinding(withClaims), map[string]*corev1.PersistentVolumeClaim{"x": bound, "y": bound}, true, embedopsv1.BoundReason},
		{"one pending", testBinding(withClaims), map[string]*corev1.PersistentVolumeClaim{"x": bound, "y": pending}, false, embedopsv1.PendingReason},
		{"one missing", testBinding(withClaims), map[string]*corev1.PersistentVolumeClaim{"x": bound}, false, embedopsv1.PendingReason},
		{"retiring", testBinding(withClaims, withPhase(embedopsv1.BindingRetiring)), map[string]*corev1.PersistentVolumeClaim{"x": bound, "y": bound}, false, embedopsv1.BindingRetiringReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ready := decision.CacheReadiness(tc.binding, tc.claims)
			g.Expect(ready.Status == metav1.ConditionTrue).To(Equal(tc.ready))
			g.Expect(ready.Reason).To(Equal(tc.reason))
		})
	}
}

// TestCacheReadinessSaysHowPendingClaimsAreFilled: the message names the
// copies not bound yet and the claims that download because a copy
// failed, at most three, and nothing once they are bound.
func TestCacheReadinessSaysHowPendingClaimsAreFilled(t *testing.T) {
	g := NewWithT(t)
	bound := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	binding := testBinding(func(b *embedopsv1.ModelCacheBinding) {
		b.Spec.Resources.PersistentVolumeClaimNames = []string{"c-0", "c-1", "c-2", "c-3", "c-4", "c-5"}
		b.Status.ClaimFills = []embedopsv1.ClaimFill{
			{Name: "c-1", Method: embedopsv1.ClaimFilledByClone, Source: "c-0"},
			{Name: "c-2", Method: embedopsv1.ClaimFilledBySnapshot, Source: "snap"},
			{Name: "c-3", Method: embedopsv1.ClaimFilledByDownload, Fallback: "no VolumeSnapshotClass names driver d"},
			{Name: "c-4", Method: embedopsv1.ClaimFilledBySnapshot, Source: "snap"},
			{Name: "c-5", Method: embedopsv1.ClaimFilledBySnapshot, Source: "snap"},
		}
	})
	ready := decision.CacheReadiness(binding, map[string]*corev1.PersistentVolumeClaim{"c-0": bound, "c-5": bound})
	g.Expect(ready.Message).To(HaveSuffix("2/6 claims bound; claim c-1 is a clone of claim c-0; claim c-2 restores VolumeSnapshot snap; " +
		"claim c-3 downloads from the hub: no VolumeSnapshotClass names driver d; 1 more"))
	all := map[string]*corev1.PersistentVolumeClaim{}
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		all[name] = bound
	}
	g.Expect(decision.CacheReadiness(binding, all).Message).To(HaveSuffix("6/6 claims bound"))
}

// reasonOf is a drift's reason, "" for none.
func reasonOf(d *decision.Drift) string {
	if d == nil {
		return ""
	}
	return d.Reason
}

// decisionOf is the decision of a valid server.
func decisionOf(t *testing.T, server *embedopsv1.EmbeddingServer) *decision.Decision {
	t.Helper()
	d, err := decision.For(server)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return d
}

func TestBindingReadiness(t *testing.T) {
	bound := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	withClaims := func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.PersistentVolumeClaimNames = []string{"x"} }
	cases := []struct {
		name    string
		binding *embedopsv1.ModelCacheBinding
		claims  map[string]*corev1.PersistentVolumeClaim
		status  metav1.ConditionStatus
		reason  string
	}{
		{"active, bound", testBinding(withClaims, withPhase(embedopsv1.BindingActive)), map[string]*corev1.PersistentVolumeClaim{"x": bound}, metav1.ConditionTrue, embedopsv1.BoundReason},
		{"active, pending", testBinding(withClaims), nil, metav1.ConditionFalse, embedopsv1.PendingReason},
		{"retiring", testBinding(withClaims, withPhase(embedopsv1.BindingRetiring)), map[string]*corev1.PersistentVolumeClaim{"x": bound}, metav1.ConditionFalse, embedopsv1.RetiringReason},
		{"released", testBinding(withClaims, withPhase(embedopsv1.BindingReleased)), nil, metav1.ConditionFalse, embedopsv1.ReleasedReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ready := decision.BindingReadiness(tc.binding, tc.claims)
			g.Expect(ready.Status).To(Equal(tc.status))
			g.Expect(ready.Reason).To(Equal(tc.reason))
		})
	}
}

func TestClaimOwnership(t *testing.T) {
	binding := testBinding(func(b *embedopsv1.ModelCacheBinding) {
		b.Name, b.Namespace, b.UID = "cache-1", "models", "binding-uid"
		b.Spec.Decision.Mode = embedopsv1.CacheModePerReplica
		b.Spec.Identity.SharingDomain = "models/tei"
	})
	claim := func(labels map[string]string, owner *metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "models", Labels: labels}}
		if owner != nil {
			c.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return c
	}
	controllerRef := func(uid types.UID) *metav1.OwnerReference {
		return &metav1.OwnerReference{Kind: embedopsv1.ModelCacheBindingKind, Name: "x", UID: uid, Controller: new(true)}
	}
	cases := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		ours  bool
	}{
		{"controlled by the binding", claim(nil, controllerRef("binding-uid")), true},
		{"controlled by another object", claim(map[string]string{embedopsv1.CacheBindingLabel: "cache-1"}, controllerRef("other")), false},
		{"labelled with the binding", claim(map[string]string{embedopsv1.CacheBindingLabel: "cache-1"}, nil), true},
		{"labelled with another binding", claim(map[string]string{embedopsv1.CacheBindingLabel: "cache-2",
			embedopsv1.NameLabel: "tei", embedopsv1.NamespaceLabel: "models"}, nil), false},
		{"made before the binding label, by the binding's server", claim(map[string]string{embedopsv1.NameLabel: "tei", embedopsv1.NamespaceLabel: "models"}, nil), true},
		{"another server's", claim(map[string]string{embedopsv1.NameLabel: "other", embedopsv1.NamespaceLabel: "models"}, nil), false},
		{"no labels, no owner", claim(nil, nil), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why := decision.ClaimOwnership(binding, tc.claim)
			NewWithT(t).Expect(why == "").To(Equal(tc.ours), why)
		})
	}
}
