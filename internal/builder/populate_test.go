package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func TestStatefulSetPopulateInitContainer(t *testing.T) {
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
			server:   server("s", fixtures.WithModel("BAAI/bge-large-en-v1.5", "v1")),
			cache:    withPopulator(perReplicaCache("cache-1", "", "10Gi"), "embedops-controller:1"),
			wantInit: true,
			wantCommand: []string{"/embedops", "populate", "--model", "BAAI/bge-large-en-v1.5", "--revision", "v1",
				"--image", embedopsv1.DefaultImage, "--prune", "--dir", "/data", "--termination-log", "/dev/termination-log"},
		},
		{
			name:     "token from its Secret",
			server:   server("s", fixtures.WithToken("hf", "token")),
			cache:    withPopulator(perReplicaCache("cache-1", "", "10Gi"), "embedops-controller:1"),
			wantInit: true,
			wantCommand: []string{"/embedops", "populate", "--model", "BAAI/bge-small-en-v1.5", "--revision", "main",
				"--image", embedopsv1.DefaultImage, "--prune", "--dir", "/data", "--termination-log", "/dev/termination-log"},
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
			sts, err := builder.StatefulSet(tc.server, tc.cache, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			pod := sts.Spec.Template.Spec
			tei := embeddingContainer(sts.Spec.Template)
			if !tc.wantInit {
				g.Expect(pod.InitContainers).To(BeEmpty())
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
			g.Expect(tei.Env).NotTo(ContainElement(HaveField("Name", "HF_HUB_OFFLINE")), "TEI never reads it")
		})
	}
}

func TestStatefulSetSharedPopulatedHasNoInitContainer(t *testing.T) {
	g := NewWithT(t)
	cache := withPopulator(sharedCache("claim", "10Gi"), "embedops-controller:1")
	sts, err := builder.StatefulSet(server("s", withCacheSpec(embedopsv1.CacheModeShared, "", "10Gi")), cache, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sts.Spec.Template.Spec.InitContainers).To(BeEmpty(), "the populate Job fills a Shared claim, not the pods")
	g.Expect(embeddingContainer(sts.Spec.Template).Env).NotTo(ContainElement(HaveField("Name", "HF_HUB_OFFLINE")))
}

func TestStatefulSetRunsTheRecordedCommit(t *testing.T) {
	const commit = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"
	pinned := func(c *builder.Cache) *builder.Cache { c.ResolvedCommit = commit; return c }
	cases := []struct {
		name         string
		cache        *builder.Cache
		wantRevision string
	}{
		{"per replica before a commit is recorded", withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), "main"},
		{"per replica once a commit is recorded", pinned(withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1")), commit},
		{"shared once a commit is recorded", pinned(withPopulator(sharedCache("claim", "10Gi"), "p:1")), commit},
		{"a commit without a populator changes nothing", pinned(perReplicaCache("cache-1", "", "10Gi")), "main"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := server("s", withCacheSpec(tc.cache.Mode, "", "10Gi"))
			sts, err := builder.StatefulSet(s, tc.cache, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(embeddingContainer(sts.Spec.Template).Args).To(ContainElement("--revision=" + tc.wantRevision))
			g.Expect(builder.ServedRevision(s, tc.cache)).To(Equal(tc.wantRevision))
			for _, init := range sts.Spec.Template.Spec.InitContainers {
				g.Expect(init.Command).To(ContainElements("--revision", tc.wantRevision), "the populator fetches what TEI runs")
			}
		})
	}
}

func TestStatefulSetRefusesABadRecordedCommit(t *testing.T) {
	g := NewWithT(t)
	cache := withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1")
	cache.ResolvedCommit = "main; rm -rf /"
	_, err := builder.StatefulSet(server("s"), cache, builder.Facts{})
	g.Expect(err).To(MatchError(ContainSubstring("not a commit id")))
}

func TestStatefulSetRefusesPopulatorWithoutCache(t *testing.T) {
	g := NewWithT(t)
	cache := &builder.Cache{Mode: embedopsv1.CacheModeNone, PopulatorImage: "embedops-controller:1"}
	_, err := builder.StatefulSet(server("s", withCacheSpec(embedopsv1.CacheModeNone, "", "10Gi")), cache, builder.Facts{})
	g.Expect(err).To(MatchError(ContainSubstring("populatorImage must be empty")))
}

func TestPodTemplatePatchMayTunePopulate(t *testing.T) {
	g := NewWithT(t)
	patch := `{"spec":{"initContainers":[{"name":"populate","resources":{"limits":{"memory":"1Gi"}},"env":[{"name":"HF_ENDPOINT","value":"http://mirror"}]}]}}`
	sts, err := builder.StatefulSet(server("s", fixtures.WithPodTemplate(patch)), withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	init := sts.Spec.Template.Spec.InitContainers[0]
	g.Expect(init.Resources.Limits.Memory().String()).To(Equal("1Gi"))
	g.Expect(init.Env).To(ContainElement(corev1.EnvVar{Name: "HF_ENDPOINT", Value: "http://mirror"}))
}
