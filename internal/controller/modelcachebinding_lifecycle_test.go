package controller

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

func withPhase(phase embedopsv1.BindingPhase) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) { b.Status.Phase = phase }
}

func TestActiveActionFollowsReferencesAndTime(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name    string
		binding *embedopsv1.ModelCacheBinding
		want    idleAction
	}{
		{"referenced", testBinding(withReference("a")), stayActive},
		{"referenced again while idle", testBinding(withReference("a"), withIdle(now, now.Add(time.Minute))), endIdle},
		{"no references, no window", testBinding(), startIdle},
		{"idle, before retireAfter", testBinding(withIdle(now, now.Add(time.Second))), waitIdle},
		{"idle, at retireAfter", testBinding(withIdle(now.Add(-time.Minute), now)), retireNow},
		{"idle, past retireAfter", testBinding(withIdle(now.Add(-time.Hour), now.Add(-time.Minute))), retireNow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(activeAction(tc.binding, now)).To(Equal(tc.want))
		})
	}
}

func TestMarkIdleWindow(t *testing.T) {
	now := time.Unix(10, 0)
	t.Run("retireAfter is idleSince plus retainFor", func(t *testing.T) {
		g := NewWithT(t)
		b := testBinding()
		markIdle(b, now, false)
		g.Expect(b.Status.IdleSince.Time).To(Equal(now))
		g.Expect(b.Status.RetireAfter.Time).To(Equal(now.Add(time.Minute)))
	})
	t.Run("a never referenced binding keeps its creation grace", func(t *testing.T) {
		g := NewWithT(t)
		b := testBinding(func(b *embedopsv1.ModelCacheBinding) { b.Spec.Decision.RetainFor.Duration = 0 })
		markIdle(b, now, true)
		g.Expect(b.Status.RetireAfter.Time).To(Equal(time.Unix(0, 0).Add(newBindingGrace)))
	})
	t.Run("the last removal starts the window, earlier ones do not", func(t *testing.T) {
		g := NewWithT(t)
		b := testBinding(withReference("a"), withReference("b"))
		removeReference(b, "a", now)
		g.Expect(b.Status.IdleSince).To(BeNil())
		removeReference(b, "b", now)
		g.Expect(b.Status.RequestReferences).To(BeEmpty())
		g.Expect(b.Status.RetireAfter.Time).To(Equal(now.Add(time.Minute)))
		addReference(b, embedopsv1.RequestReference{UID: "c"})
		g.Expect(b.Status.IdleSince).To(BeNil())
		g.Expect(b.Status.RetireAfter).To(BeNil())
		g.Expect(hasReference(b, "c")).To(BeTrue())
	})
}

func TestReusableOnlyWhenActiveWithTheSameDecision(t *testing.T) {
	d := decisionOf(t, embeddingServer("models", "tei"))
	other := decisionOf(t, embeddingServer("models", "tei", withCacheSize("20Gi")))
	recorded := func(phase embedopsv1.BindingPhase) *embedopsv1.ModelCacheBinding {
		return testBinding(withPhase(phase), func(b *embedopsv1.ModelCacheBinding) {
			b.Spec.Identity, b.Spec.Decision = d.Identity, d.Decision
		})
	}
	g := NewWithT(t)
	g.Expect(reusable(recorded(""), d)).To(BeTrue())
	g.Expect(reusable(recorded(embedopsv1.BindingActive), d)).To(BeTrue())
	g.Expect(reusable(recorded(embedopsv1.BindingRetiring), d)).To(BeFalse())
	g.Expect(reusable(recorded(embedopsv1.BindingReleased), d)).To(BeFalse())
	g.Expect(reusable(recorded(embedopsv1.BindingActive), other)).To(BeFalse())
}

func TestBindingNamesAndClaimNames(t *testing.T) {
	g := NewWithT(t)
	d := decisionOf(t, embeddingServer("models", "tei"))
	base := decision.BindingName(d)
	g.Expect(bindingNameAt(base, 1)).To(Equal(base))
	g.Expect(bindingNameAt(base, 3)).To(Equal(base + "-3"))
	g.Expect(bindingSuffix(base, base)).To(Equal(1))
	g.Expect(bindingSuffix(base, base+"-3")).To(Equal(3))
	g.Expect(bindingSuffix(base, base+"-03")).To(BeZero())
	g.Expect(bindingSuffix(base, base+"-x")).To(BeZero())
	g.Expect(bindingSuffix(base, "other")).To(BeZero())
	template := decision.ClaimTemplateName(d)
	g.Expect(perReplicaClaimNames(template, "tei", 2)).To(Equal([]string{template + "-tei-0", template + "-tei-1"}))
	g.Expect(perReplicaClaimNames(template, "tei", 0)).To(BeEmpty())
	g.Expect(missingNames([]string{"a", "b"}, []string{"a", "b", "c"})).To(Equal([]string{"c"}))
	g.Expect(missingNames([]string{"a", "b", "c"}, []string{"a"})).To(BeEmpty())
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
	g.Expect(prunable(bindings, 3)).To(BeEmpty())
	pruned := prunable(bindings, 1)
	g.Expect(pruned).To(HaveLen(2))
	g.Expect(pruned[0].Name).To(Equal("a"))
	g.Expect(pruned[1].Name).To(Equal("b"))
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
	g.Expect(storageClassDrift(recorded, "csi.a", map[string]string{"type": "ssd"})).To(BeNil())
	g.Expect(reasonOf(storageClassDrift(recorded, "csi.b", map[string]string{"type": "ssd"}))).To(Equal(embedopsv1.StorageClassDriftReason))
	g.Expect(reasonOf(storageClassDrift(recorded, "csi.a", map[string]string{"type": "hdd"}))).To(Equal(embedopsv1.StorageClassDriftReason))
	g.Expect(storageClassDrift(testBinding(), "csi.b", nil)).To(BeNil(), "facts that were not recorded cannot drift")
	g.Expect(claimSizeDrift(recorded, []corev1.PersistentVolumeClaim{claim("10Gi")})).To(BeNil())
	g.Expect(reasonOf(claimSizeDrift(recorded, []corev1.PersistentVolumeClaim{claim("20Gi")}))).To(Equal(embedopsv1.ClaimResizedReason))
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
			ready, reason, _ := cacheReadiness(tc.binding, tc.claims)
			g.Expect(ready).To(Equal(tc.ready))
			g.Expect(reason).To(Equal(tc.reason))
		})
	}
}

// reasonOf is a drift's reason, "" for none.
func reasonOf(d *drift) string {
	if d == nil {
		return ""
	}
	return d.reason
}
