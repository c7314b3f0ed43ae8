package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

func TestStatefulSetPopulateInitContainer(t *testing.T) {
	offline := corev1.EnvVar{Name: "HF_HUB_OFFLINE", Value: "1"}
	cases := []struct {
		name        string
		server      *embedopsv1.EmbeddingServer
		cache       *builder.Cache
		wantInit    bool
		wantCommand []string
		wantEnv     []corev1.EnvVar
	}{
		{
			name:   "per replica without a populator image",
			server: server("s"),
			cache:  perReplicaCache("cache-1", "", "10Gi"),
		},
		{
			name:     "per replica with a populator image",
			server:   server("s", withModel("BAAI/bge-large-en-v1.5", "v1")),
			cache:    withPopulator(perReplicaCache("cache-1", "", "10Gi"), "embedops-controller:1"),
			wantInit: true,
			wantCommand: []string{"/embedops", "populate", "--model", "BAAI/bge-large-en-v1.5", "--revision", "v1",
				"--dir", "/data", "--termination-log", "/dev/termination-log"},
		},
		{
			name:     "token from its Secret",
			server:   server("s", withToken("hf", "token")),
			cache:    withPopulator(perReplicaCache("cache-1", "", "10Gi"), "embedops-controller:1"),
			wantInit: true,
			wantCommand: []string{"/embedops", "populate", "--model", "BAAI/bge-small-en-v1.5", "--revision", "main",
				"--dir", "/data", "--termination-log", "/dev/termination-log"},
			wantEnv: []corev1.EnvVar{secretEnv("HF_TOKEN", "hf", "token")},
		},
		{
			name:   "no cache",
			server: server("s", withCacheSpec(embedopsv1.CacheModeNone, "", "10Gi")),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(tc.server, tc.cache)
			g.Expect(err).NotTo(HaveOccurred())
			pod := sts.Spec.Template.Spec
			tei := embeddingContainer(sts.Spec.Template)
			if !tc.wantInit {
				g.Expect(pod.InitContainers).To(BeEmpty())
				g.Expect(tei.Env).NotTo(ContainElement(offline))
				return
			}
			g.Expect(pod.InitContainers).To(HaveLen(1))
			init := pod.InitContainers[0]
			g.Expect(init.Name).To(Equal(builder.PopulateContainerName))
			g.Expect(init.Image).To(Equal(tc.cache.PopulatorImage))
			g.Expect(init.Command).To(Equal(tc.wantCommand))
			g.Expect(init.Args).To(BeEmpty())
			g.Expect(init.Env).To(Equal(tc.wantEnv))
			g.Expect(init.TerminationMessagePath).To(Equal(builder.TerminationLogPath))
			g.Expect(init.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageReadFile))
			g.Expect(init.SecurityContext).To(Equal(tei.SecurityContext))
			g.Expect(init.VolumeMounts).To(Equal(tei.VolumeMounts))
			g.Expect(init.Resources.Requests).NotTo(BeEmpty())
			g.Expect(tei.Env).To(ContainElement(offline))
		})
	}
}

func TestStatefulSetSharedPopulatedRunsOffline(t *testing.T) {
	g := NewWithT(t)
	cache := withPopulator(sharedCache("claim", "10Gi"), "embedops-controller:1")
	sts, err := builder.StatefulSet(server("s", withCacheSpec(embedopsv1.CacheModeShared, "", "10Gi")), cache)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sts.Spec.Template.Spec.InitContainers).To(BeEmpty(), "the populate Job fills a Shared claim, not the pods")
	g.Expect(embeddingContainer(sts.Spec.Template).Env).To(ContainElement(corev1.EnvVar{Name: "HF_HUB_OFFLINE", Value: "1"}))
}

func TestStatefulSetRefusesPopulatorWithoutCache(t *testing.T) {
	g := NewWithT(t)
	cache := &builder.Cache{Mode: embedopsv1.CacheModeNone, PopulatorImage: "embedops-controller:1"}
	_, err := builder.StatefulSet(server("s", withCacheSpec(embedopsv1.CacheModeNone, "", "10Gi")), cache)
	g.Expect(err).To(MatchError(ContainSubstring("populatorImage must be empty")))
}

func TestPodTemplatePatchMayTunePopulate(t *testing.T) {
	g := NewWithT(t)
	patch := `{"spec":{"initContainers":[{"name":"populate","resources":{"limits":{"memory":"1Gi"}},"env":[{"name":"HF_ENDPOINT","value":"http://mirror"}]}]}}`
	sts, err := builder.StatefulSet(server("s", withPodTemplate(patch)), withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"))
	g.Expect(err).NotTo(HaveOccurred())
	init := sts.Spec.Template.Spec.InitContainers[0]
	g.Expect(init.Resources.Limits.Memory().String()).To(Equal("1Gi"))
	g.Expect(init.Env).To(ContainElement(corev1.EnvVar{Name: "HF_ENDPOINT", Value: "http://mirror"}))
}
