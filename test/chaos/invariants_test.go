package chaos

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// binding is a binding in phase listing claims, superseded by successor
// when not empty.
func binding(name string, phase embedopsv1.BindingPhase, successor string, claims ...string) embedopsv1.ModelCacheBinding {
	b := embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	b.Spec.Resources.PersistentVolumeClaimNames = claims
	b.Status.Phase, b.Status.SupersededBy = phase, successor
	return b
}

func TestReleasedBindingsHoldNoClaimsFollowsTheSuccessionChain(t *testing.T) {
	claim := []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "cache-tei-0"}}}
	released, active := embedopsv1.BindingReleased, embedopsv1.BindingActive
	cases := []struct {
		name       string
		bindings   []embedopsv1.ModelCacheBinding
		claims     []corev1.PersistentVolumeClaim
		violations int
	}{
		{"released, its claim gone", []embedopsv1.ModelCacheBinding{binding("a", released, "", "cache-tei-0")}, nil, 0},
		{"released, its claim left behind", []embedopsv1.ModelCacheBinding{binding("a", released, "", "cache-tei-0")}, claim, 1},
		{"superseded by the binding in use", []embedopsv1.ModelCacheBinding{
			binding("a", released, "b", "cache-tei-0"), binding("b", active, "", "cache-tei-0")}, claim, 0},
		{"superseded twice", []embedopsv1.ModelCacheBinding{
			binding("a", released, "b", "cache-tei-0"), binding("b", released, "c", "cache-tei-0"), binding("c", active, "", "cache-tei-0")}, claim, 0},
		{"listed only by a binding outside the chain", []embedopsv1.ModelCacheBinding{
			binding("a", released, "", "cache-tei-0"), binding("other", active, "", "cache-tei-0")}, claim, 1},
		{"a successor that does not list it", []embedopsv1.ModelCacheBinding{
			binding("a", released, "b", "cache-tei-0"), binding("b", active, "", "cache-tei-1")}, claim, 1},
		{"a chain that loops", []embedopsv1.ModelCacheBinding{
			binding("a", released, "b", "cache-tei-0"), binding("b", released, "a", "cache-tei-0")}, claim, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(ReleasedBindingsHoldNoClaims(&Snapshot{Bindings: tc.bindings, Claims: tc.claims})).To(HaveLen(tc.violations))
		})
	}
}
