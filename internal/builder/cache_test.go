package builder_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

func TestStatefulSetMountsTheCache(t *testing.T) {
	emptyDir := corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	cases := []struct {
		name          string
		cache         *builder.Cache
		wantMount     string
		wantVolumes   []corev1.Volume
		wantTemplates int
	}{
		{
			name:          "per-replica claim template",
			cache:         perReplicaCache("cache-4f1c2b7a9e", "fast-ssd", "40Gi"),
			wantMount:     "cache-4f1c2b7a9e",
			wantTemplates: 1,
		},
		{
			name:      "shared claim",
			cache:     sharedCache("mcb-claim", "20Gi"),
			wantMount: "cache",
			wantVolumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "mcb-claim"},
			}}},
		},
		{
			name:        "none",
			cache:       &builder.Cache{Mode: embedopsv1.CacheModeNone},
			wantMount:   "cache",
			wantVolumes: []corev1.Volume{emptyDir},
		},
		{
			name:        "nil is none",
			cache:       nil,
			wantMount:   "cache",
			wantVolumes: []corev1.Volume{emptyDir},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := server("s")
			sts, err := builder.StatefulSet(s, tc.cache, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(embeddingContainer(sts.Spec.Template).VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: tc.wantMount, MountPath: "/data"}))
			g.Expect(sts.Spec.Template.Spec.Volumes).To(Equal(tc.wantVolumes))
			g.Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(tc.wantTemplates))
			if tc.wantTemplates == 0 {
				g.Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy).To(BeNil())
				return
			}
			claim := sts.Spec.VolumeClaimTemplates[0]
			g.Expect(claim.Name).To(Equal(tc.cache.TemplateName))
			g.Expect(claim.Labels).To(Equal(claimLabels(s, tc.cache.Binding)))
			g.Expect(claim.Spec.StorageClassName).To(HaveValue(Equal(tc.cache.StorageClassName)))
			g.Expect(claim.Spec.AccessModes).To(Equal(tc.cache.AccessModes))
			g.Expect(claim.Spec.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceStorage, tc.cache.Size))
			g.Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy).NotTo(BeNil())
			g.Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted).To(BeEquivalentTo("Retain"))
			g.Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled).To(BeEquivalentTo("Retain"))
		})
	}
}

func TestStatefulSetUsesTheDefaultStorageClassWhenNoneIsNamed(t *testing.T) {
	g := NewWithT(t)
	sts, err := builder.StatefulSet(server("s"), perReplicaCache("cache-1", "", "10Gi"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(BeNil(), `"" would ask for no class at all`)
}

func TestStatefulSetRefusesAnInconsistentCache(t *testing.T) {
	perReplica := func(change func(*builder.Cache)) *builder.Cache {
		c := perReplicaCache("cache-1", "", "10Gi")
		change(c)
		return c
	}
	shared := func(change func(*builder.Cache)) *builder.Cache {
		c := sharedCache("claim", "10Gi")
		change(c)
		return c
	}
	cases := []struct {
		name    string
		cache   *builder.Cache
		message string
	}{
		{"per-replica without a template name", perReplica(func(c *builder.Cache) { c.TemplateName = "" }), "templateName is required"},
		{"per-replica template name not a DNS label", perReplica(func(c *builder.Cache) { c.TemplateName = "Cache_1" }), "templateName: a lowercase RFC 1123 label"},
		{"per-replica with a claim name", perReplica(func(c *builder.Cache) { c.ClaimName = "claim" }), "claimName must be empty"},
		{"per-replica without a size", perReplica(func(c *builder.Cache) { c.Size = resource.Quantity{} }), "size must be greater than zero"},
		{"per-replica without access modes", perReplica(func(c *builder.Cache) { c.AccessModes = nil }), "accessModes must not be empty"},
		{"shared without a claim name", shared(func(c *builder.Cache) { c.ClaimName = "" }), "claimName is required"},
		{"shared with a template name", shared(func(c *builder.Cache) { c.TemplateName = "cache-1" }), "templateName must be empty"},
		{"none with a claim name", &builder.Cache{Mode: embedopsv1.CacheModeNone, ClaimName: "claim"}, "claimName must be empty"},
		{"unknown mode", &builder.Cache{Mode: "Local"}, `unknown mode "Local"`},
		{"empty mode", &builder.Cache{}, `unknown mode ""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(server("s"), tc.cache, builder.Facts{})
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			g.Expect(err.Error()).To(HavePrefix("invalid cache"))
			g.Expect(errors.Is(err, builder.ErrInvalidPodTemplate)).To(BeFalse(), "a bad cache is the controller's bug, not the user's")
			g.Expect(sts).To(BeNil())
		})
	}
}
