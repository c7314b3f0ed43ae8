package audit

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

func TestDifferencesNameEveryChangedField(t *testing.T) {
	rendered, err := decision.For(server("ns", "a"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		edit   func(*embedopsv1.ModelCacheBindingSpec)
		fields []string
	}{
		{name: "same", edit: func(*embedopsv1.ModelCacheBindingSpec) {}},
		{name: "same size written otherwise", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Decision.Size = resource.MustParse("10240Mi") }},
		{name: "access modes in another order", edit: func(s *embedopsv1.ModelCacheBindingSpec) {
			s.Decision.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteOnce}
		}},
		{name: "cluster facts are not compared", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Decision.Provisioner = "csi.example.com" }},
		{name: "model", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Identity.Model = "org/other" }, fields: []string{"identity.model"}},
		{name: "retention and class", edit: func(s *embedopsv1.ModelCacheBindingSpec) {
			s.Decision.RetainFor = metav1.Duration{Duration: time.Hour}
			s.Decision.StorageClassName = "fast"
		}, fields: []string{"decision.storageClassName", "decision.retainFor"}},
		{name: "access modes", edit: func(s *embedopsv1.ModelCacheBindingSpec) {
			s.Decision.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}, fields: []string{"decision.accessModes"}},
		{name: "existing claim", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Decision.ExistingClaim = "models" },
			fields: []string{"decision.existingClaim"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			recorded := embedopsv1.ModelCacheBindingSpec{Identity: rendered.Identity, Decision: *rendered.Decision.DeepCopy()}
			tc.edit(&recorded)
			var fields []string
			for _, d := range differences(recorded, rendered) {
				fields = append(fields, d.Field)
			}
			g.Expect(fields).To(Equal(tc.fields))
		})
	}
}

func TestDifferencesAgainstCacheNone(t *testing.T) {
	g := NewWithT(t)
	recorded := bindingFor(t, server("ns", "a"), "c").Spec
	g.Expect(differences(recorded, nil)).To(Equal([]Difference{{Field: "decision.mode", Recorded: "PerReplica", Rendered: "None"}}))
}

func TestIntegrityRecomputesKeyAndDigest(t *testing.T) {
	good := bindingFor(t, server("ns", "a"), "c").Spec
	cases := []struct {
		name   string
		edit   func(*embedopsv1.ModelCacheBindingSpec)
		fields []string
	}{
		{name: "untouched", edit: func(*embedopsv1.ModelCacheBindingSpec) {}},
		{name: "size", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Decision.Size = resource.MustParse("1Gi") }, fields: []string{"decision.digest"}},
		{name: "key", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Identity.Key = "sha256:00" }, fields: []string{"identity.key", "decision.digest"}},
		{name: "model", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Identity.Model = "org/x" }, fields: []string{"identity.key", "decision.digest"}},
		{name: "unrecordable", edit: func(s *embedopsv1.ModelCacheBindingSpec) { s.Decision.Mode = "None" }, fields: []string{"decision.digest"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := *good.DeepCopy()
			tc.edit(&spec)
			var fields []string
			for _, d := range integrity(spec) {
				fields = append(fields, d.Field)
				g.Expect(d.Recomputed).NotTo(BeEmpty())
			}
			g.Expect(fields).To(Equal(tc.fields))
		})
	}
}

func TestMergedReportsAFieldOnceInSpecOrder(t *testing.T) {
	g := NewWithT(t)
	rendered := []Difference{{Field: "decision.size", Recorded: "2Gi", Rendered: "1Gi"}, {Field: "decision.digest", Recorded: "a", Rendered: "b"}}
	selfChecked := []Difference{{Field: "decision.digest", Recorded: "a", Recomputed: "c"}, {Field: "identity.key", Recorded: "k", Recomputed: "l"}}
	g.Expect(merged(rendered, selfChecked)).To(Equal([]Difference{
		{Field: "identity.key", Recorded: "k", Recomputed: "l"},
		{Field: "decision.size", Recorded: "2Gi", Rendered: "1Gi"},
		{Field: "decision.digest", Recorded: "a", Rendered: "b", Recomputed: "c"},
	}))
}

func TestDifferenceString(t *testing.T) {
	cases := []struct {
		in   Difference
		want string
	}{
		{in: Difference{Field: "decision.size", Recorded: "20Gi", Rendered: "10Gi"}, want: "decision.size: recorded 20Gi, rendered 10Gi"},
		{in: Difference{Field: "decision.storageClassName", Recorded: "fast"}, want: `decision.storageClassName: recorded fast, rendered ""`},
		{in: Difference{Field: "decision.digest", Recorded: "a", Recomputed: "b"}, want: "decision.digest: recorded a, recomputed from the recorded fields b"},
		{in: Difference{Field: "decision.digest", Recorded: "a", Rendered: "b", Recomputed: "b"}, want: "decision.digest: recorded a, rendered b, recomputed from the recorded fields b"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			NewWithT(t).Expect(tc.in.String()).To(Equal(tc.want))
		})
	}
}
