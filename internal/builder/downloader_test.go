package builder_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

// networkedServer has every hub and network setting TEI reads, a variable
// the downloader has no use for, a CA bundle in a Secret, a pull secret and
// GPU node placement.
func networkedServer(mode embedopsv1.CacheMode) *embedopsv1.EmbeddingServer {
	s := server("s", fixtures.WithToken("hf", "token"), withCacheSpec(mode, "", "10Gi"),
		withImage(embedopsv1.DefaultImage, corev1.PullIfNotPresent, "registry-credentials"),
		withServiceAccount("embeddings"),
		fixtures.WithEnv(
			corev1.EnvVar{Name: "HF_ENDPOINT", Value: "https://hub.mirror.corp"},
			corev1.EnvVar{Name: "HF_HUB_USER_AGENT_ORIGIN", Value: "embedops"},
			corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.corp:3128"},
			corev1.EnvVar{Name: "no_proxy", Value: ".svc,.cluster.local"},
			corev1.EnvVar{Name: "RUST_LOG", Value: "debug"}),
		fixtures.WithPodTemplate(`{"spec":{"nodeSelector":{"gpu":"true"},`+
			`"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}],`+
			`"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}},`+
			`"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app.kubernetes.io/instance":"s"}}}]}}}}`))
	s.Spec.Model.CABundleRef = &embedopsv1.CABundleRef{Kind: "Secret", Name: "corp-ca", Key: "bundle.pem"}
	return s
}

// downloaderEnv is what the downloader must get of networkedServer.
var downloaderEnv = []corev1.EnvVar{
	secretEnv("HF_TOKEN", "hf", "token"),
	{Name: "SSL_CERT_FILE", Value: "/etc/embedops/ca/ca.crt"},
	{Name: "HF_ENDPOINT", Value: "https://hub.mirror.corp"},
	{Name: "HF_HUB_USER_AGENT_ORIGIN", Value: "embedops"},
	{Name: "HTTPS_PROXY", Value: "http://proxy.corp:3128"},
	{Name: "no_proxy", Value: ".svc,.cluster.local"},
}

var caBundleMount = corev1.VolumeMount{Name: "ca-bundle", MountPath: "/etc/embedops/ca", ReadOnly: true}

func TestThePopulateInitContainerGetsTheHubAndNetworkSettingsOfTEI(t *testing.T) {
	g := NewWithT(t)
	sts, err := builder.StatefulSet(networkedServer(embedopsv1.CacheModePerReplica), withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	pod := sts.Spec.Template.Spec
	g.Expect(pod.InitContainers).To(HaveLen(1))
	g.Expect(pod.InitContainers[0].Env).To(Equal(downloaderEnv))
	g.Expect(pod.InitContainers[0].VolumeMounts).To(ContainElement(caBundleMount))
	tei := embeddingContainer(sts.Spec.Template)
	g.Expect(tei.Env).To(ContainElements(downloaderEnv), "the downloader gets what TEI gets")
	g.Expect(tei.VolumeMounts).To(ContainElement(caBundleMount))
	g.Expect(pod.Volumes).To(ContainElement(corev1.Volume{Name: "ca-bundle", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "corp-ca", Items: []corev1.KeyToPath{{Key: "bundle.pem", Path: "ca.crt"}}, DefaultMode: new(int32(0o444)),
	}}}))
}

func TestACABundleFromAConfigMapDefaultsItsKey(t *testing.T) {
	g := NewWithT(t)
	s := server("s")
	s.Spec.Model.CABundleRef = &embedopsv1.CABundleRef{Name: "corp-ca"}
	sts, err := builder.StatefulSet(s, nil, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.ConfigMap.Items", []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}})))
}

func TestThePopulateJobIsPlacedPulledAndBoundedAsTheServer(t *testing.T) {
	g := NewWithT(t)
	s := networkedServer(embedopsv1.CacheModeShared)
	binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "mcb-1", Namespace: "ns", UID: "uid-1"}}
	job, err := builder.PopulateJob(s, binding, withPopulator(sharedCache("mcb-1", "10Gi"), "p:1"), builder.Facts{PopulateDeadline: 90*time.Second + time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Spec.ActiveDeadlineSeconds).To(HaveValue(Equal(int64(91))), "rounded up, never shorter than asked")
	pod := job.Spec.Template.Spec
	g.Expect(pod.Containers[0].Env).To(Equal(downloaderEnv))
	g.Expect(pod.Containers[0].VolumeMounts).To(ContainElement(caBundleMount))
	g.Expect(pod.Volumes).To(ContainElement(HaveField("Name", "ca-bundle")))
	g.Expect(pod.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "registry-credentials"}}))
	g.Expect(pod.ServiceAccountName).To(Equal("embeddings"))
	g.Expect(pod.NodeSelector).To(Equal(map[string]string{"gpu": "true"}))
	g.Expect(pod.Tolerations).To(ConsistOf(HaveField("Key", "nvidia.com/gpu")))
	g.Expect(pod.Affinity.NodeAffinity).NotTo(BeNil())
	g.Expect(pod.Affinity.PodAntiAffinity).To(BeNil(), "it selects the server's pods, which the Job's pod is not")

	job, err = builder.PopulateJob(server("s", withCacheSpec(embedopsv1.CacheModeShared, "", "10Gi")), binding, withPopulator(sharedCache("mcb-1", "10Gi"), "p:1"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Spec.ActiveDeadlineSeconds).To(BeNil())
}

func TestNoObjectWithoutAnOwnerCarriesAGitOpsTrackingKey(t *testing.T) {
	// Argo CD adopts every ownerless object whose app.kubernetes.io/instance
	// names an Application (gitops-engine v0.7.3 pkg/cache/cluster.go,
	// GetManagedLiveObjs: `isManaged(o) && len(o.OwnerRefs) == 0`) and
	// prunes it with the Application. PerReplica claims have no owner.
	g := NewWithT(t)
	s := server("s")
	s.Labels = map[string]string{"app.kubernetes.io/instance": "s", "kustomize.toolkit.fluxcd.io/name": "apps"}
	s.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "apps:embedops.dev/EmbeddingServer:ns/s"}
	sts, err := builder.StatefulSet(s, perReplicaCache("cache-1", "", "10Gi"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "mcb-1", Namespace: "ns"}}
	claims := []metav1.ObjectMeta{sts.Spec.VolumeClaimTemplates[0].ObjectMeta, builder.SharedClaim(binding, "mcb-1").ObjectMeta}
	g.Expect(builder.SharedClaim(binding, "mcb-1").OwnerReferences).NotTo(BeEmpty())
	for _, claim := range claims {
		for _, key := range builder.TrackingKeys {
			g.Expect(claim.Labels).NotTo(HaveKey(key), "claim %s", claim.Name)
			g.Expect(claim.Annotations).NotTo(HaveKey(key), "claim %s", claim.Name)
		}
	}
	g.Expect(builder.TrackingKeys).To(ContainElement("app.kubernetes.io/instance"))
}
