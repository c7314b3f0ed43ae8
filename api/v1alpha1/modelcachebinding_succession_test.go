package v1alpha1_test

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// successor is a binding that took over the storage of "cache".
func successor(b *embedopsv1.ModelCacheBinding) {
	b.Name = "cache-2"
	b.Spec.Supersedes = "cache"
	b.Spec.Resources.StorageName = "cache"
	b.Spec.Resources.ClaimTemplateName = "cache-0123456789"
	b.Spec.Resources.StatefulSetName = "tei-a1b2c3"
}

func TestModelCacheBindingSuccessionIsImmutable(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	root := binding(namespace)
	g.Expect(env.Client.Create(t.Context(), root)).To(Succeed())
	taken := binding(namespace, successor)
	g.Expect(env.Client.Create(t.Context(), taken)).To(Succeed())

	cases := []struct {
		name    string
		object  *embedopsv1.ModelCacheBinding
		modify  func(*embedopsv1.ModelCacheBinding)
		message string
	}{
		{"supersedes changed", taken, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Supersedes = "other" }, "spec.supersedes is immutable"},
		{"supersedes removed", taken, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Supersedes = "" }, "spec.supersedes is immutable"},
		{"supersedes added", root, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Supersedes = "other" }, "spec.supersedes is immutable"},
		{"storage name changed", taken, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.StorageName = "other" }, "spec.resources.storageName is immutable"},
		{"storage name removed", taken, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.StorageName = "" }, "spec.resources.storageName is immutable"},
		{"storage name added", root, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.StorageName = "other" }, "spec.resources.storageName is immutable"},
		{"claim template changed", taken, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.ClaimTemplateName = "other" }, "spec.resources.claimTemplateName is immutable"},
		{"claim template added", root, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.ClaimTemplateName = "other" }, "spec.resources.claimTemplateName is immutable"},
		{"StatefulSet changed", taken, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.StatefulSetName = "other" }, "spec.resources.statefulSetName is immutable"},
		{"StatefulSet removed", taken, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.StatefulSetName = "" }, "spec.resources.statefulSetName is immutable"},
		{"StatefulSet added", root, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.StatefulSetName = "other" }, "spec.resources.statefulSetName is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed := tc.object.DeepCopy()
			tc.modify(changed)
			NewWithT(t).Expect(env.Client.Update(t.Context(), changed)).To(MatchError(ContainSubstring(tc.message)))
		})
	}
}

func TestModelCacheBindingIsReleasedFromActiveOnlyWhenSuperseded(t *testing.T) {
	g := NewWithT(t)
	b := binding(harness.Namespace(t, env.Client))
	g.Expect(env.Client.Create(t.Context(), b)).To(Succeed())
	g.Expect(setStatus(t, b, func(s *embedopsv1.ModelCacheBindingStatus) { s.Phase = embedopsv1.BindingActive })).To(Succeed())
	g.Expect(setStatus(t, b.DeepCopy(), func(s *embedopsv1.ModelCacheBindingStatus) { s.Phase = embedopsv1.BindingReleased })).
		To(MatchError(ContainSubstring("status.phase only moves")), "Active skips Retiring only when superseded")

	g.Expect(setStatus(t, b, func(s *embedopsv1.ModelCacheBindingStatus) { s.SupersededBy = "cache-2" })).To(Succeed())
	g.Expect(setStatus(t, b, func(s *embedopsv1.ModelCacheBindingStatus) { s.SupersededBy = "cache-3" })).
		To(Succeed(), "an Active binding may name another successor (one that was never created)")
	g.Expect(setStatus(t, b.DeepCopy(), func(s *embedopsv1.ModelCacheBindingStatus) { s.SupersededBy = "" })).
		To(MatchError(ContainSubstring("status.supersededBy cannot be removed")))
	g.Expect(setStatus(t, b, func(s *embedopsv1.ModelCacheBindingStatus) { s.Phase = embedopsv1.BindingReleased })).To(Succeed())

	g.Expect(setStatus(t, b.DeepCopy(), func(s *embedopsv1.ModelCacheBindingStatus) { s.SupersededBy = "cache-4" })).
		To(MatchError(ContainSubstring("status.supersededBy changes only while the binding is Active")))
	g.Expect(setStatus(t, b.DeepCopy(), func(s *embedopsv1.ModelCacheBindingStatus) { s.Phase = embedopsv1.BindingRetiring })).
		To(MatchError(ContainSubstring("status.phase only moves")), "a superseded binding never retires")
}
