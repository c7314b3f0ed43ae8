package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/tei"
	"github.com/embedops/embedops/test/fixtures"
)

func TestExistingClaimIsMountedReadOnlyByEveryReplica(t *testing.T) {
	g := NewWithT(t)
	s := server("s", fixtures.WithExistingClaim("models"), fixtures.WithReplicas(3), fixtures.WithModel("BAAI/bge-small-en-v1.5", "main"))
	cache := withPopulator(existingCache("models"), "embedops-controller:1")
	cache.ResolvedCommit = commit

	sts, err := builder.StatefulSet(s, cache, builder.Facts{})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sts.Spec.VolumeClaimTemplates).To(BeEmpty(), "no claim is made")
	g.Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy).To(BeNil())
	pod := sts.Spec.Template.Spec
	g.Expect(pod.InitContainers).To(BeEmpty(), "a verify Job checks the claim once, before the StatefulSet exists")
	g.Expect(pod.Volumes).To(ContainElement(corev1.Volume{Name: builder.CacheVolumeName, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models", ReadOnly: true},
	}}))
	container := embeddingContainer(sts.Spec.Template)
	g.Expect(container.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: builder.CacheVolumeName, MountPath: builder.CacheMountPath, ReadOnly: true}))
	g.Expect(container.Env).NotTo(ContainElement(HaveField("Name", "HF_TOKEN")), "no token without tokenSecretRef")

	parsed, err := tei.Parse(container.Args, teiEnvironment(container))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed["revision"].Value).To(Equal("main"),
		"hf-hub finds the snapshot through refs/<revision>, and nothing writes refs/<commit> on the user's read-only claim")
	g.Expect(parsed["model_id"].Value).To(Equal("BAAI/bge-small-en-v1.5"))
	g.Expect(parsed["huggingface_hub_cache"]).To(Equal(tei.Given{Value: builder.CacheMountPath, Source: tei.Environment}))
}

func TestExistingClaimJobOnlyVerifiesOffline(t *testing.T) {
	g := NewWithT(t)
	s := server("s", fixtures.WithExistingClaim("models"), fixtures.WithModel("BAAI/bge-small-en-v1.5", "v1"),
		fixtures.WithToken("hf", "token"),
		fixtures.WithEnv(corev1.EnvVar{Name: "HF_ENDPOINT", Value: "http://mirror"}, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}),
		fixtures.WithPodTemplate(map[string]any{"spec": map[string]any{"nodeSelector": map[string]any{"zone": "a"}}}))
	binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "bge-1", Namespace: "ns", UID: "uid-1"}}

	job, err := builder.PopulateJob(s, binding, withPopulator(existingCache("models"), "embedops-controller:1"), builder.Facts{})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Name).To(Equal("bge-1-populate"))
	g.Expect(job.OwnerReferences).To(ConsistOf(HaveField("UID", binding.UID)), "the binding owns the Job, never the claim")
	pod := job.Spec.Template.Spec
	g.Expect(pod.NodeSelector).To(HaveKeyWithValue("zone", "a"), "placed where the server's pods reach the volume")
	g.Expect(pod.Volumes).To(Equal([]corev1.Volume{{Name: builder.CacheVolumeName, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models", ReadOnly: true},
	}}}))
	g.Expect(pod.Containers).To(HaveLen(1))
	verify := pod.Containers[0]
	g.Expect(verify.Command).To(Equal([]string{"/embedops", "populate", "--model", "BAAI/bge-small-en-v1.5", "--revision", "v1",
		"--image", embedopsv1.DefaultImage, "--dir", "/data", "--verify-only", "--termination-log", "/dev/termination-log"}))
	g.Expect(verify.Env).To(BeEmpty(), "no token, no hub, no proxy: it needs no network")
	g.Expect(verify.VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: builder.CacheVolumeName, MountPath: "/data", ReadOnly: true}}))
	g.Expect(verify.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageReadFile))
	g.Expect(verify.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
}

func TestExistingCacheIsNeverPerReplica(t *testing.T) {
	g := NewWithT(t)
	cache := perReplicaCache("cache-1", "", "10Gi")
	cache.Existing = true
	_, err := builder.StatefulSet(server("s"), cache, builder.Facts{})
	g.Expect(err).To(MatchError(ContainSubstring("an existing claim is mounted as a Shared one")))
}
