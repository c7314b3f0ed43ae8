package builder_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/util/validation"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

func TestPopulateJob(t *testing.T) {
	g := NewWithT(t)
	s := server("s", fixtures.WithModel("BAAI/bge-large-en-v1.5", "v1"), fixtures.WithToken("hf", "token"),
		fixtures.WithEnv(corev1.EnvVar{Name: "HF_ENDPOINT", Value: "http://mirror"}, corev1.EnvVar{Name: "OTHER", Value: "x"}))
	binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "bge-1", Namespace: "ns", UID: "uid-1"}}

	job, err := builder.PopulateJob(s, binding, withPopulator(sharedCache("bge-1", "10Gi"), "embedops-controller:1"), builder.Facts{})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(job.Name).To(Equal("bge-1-populate"))
	g.Expect(job.Namespace).To(Equal("ns"))
	g.Expect(job.Labels).To(HaveKeyWithValue(embedopsv1.PopulatesLabel, "bge-1"))
	g.Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(embedopsv1.PopulatesLabel, "bge-1"))
	g.Expect(job.OwnerReferences).To(ConsistOf(HaveField("UID", binding.UID)))
	g.Expect(*job.OwnerReferences[0].Controller).To(BeTrue())
	pod := job.Spec.Template.Spec
	g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(pod.Volumes).To(ConsistOf(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "bge-1")))
	g.Expect(pod.Containers).To(HaveLen(1))
	populate := pod.Containers[0]
	g.Expect(populate.Name).To(Equal(builder.PopulateContainerName))
	g.Expect(populate.Image).To(Equal("embedops-controller:1"))
	g.Expect(populate.Command).To(Equal([]string{"/embedops", "populate", "--model", "BAAI/bge-large-en-v1.5",
		"--revision", "v1", "--all-backends", "--prune", "--dir", "/data", "--termination-log", "/dev/termination-log"}),
		"servers of every image share the claim, which its Job alone writes and prunes")
	g.Expect(populate.Env).To(ConsistOf(secretEnv("HF_TOKEN", "hf", "token"), corev1.EnvVar{Name: "HF_ENDPOINT", Value: "http://mirror"}))
	g.Expect(populate.VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: builder.CacheVolumeName, MountPath: "/data"}))
	g.Expect(populate.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(populate.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageReadFile))
}

func TestPopulateJobNeedsAPopulatedCache(t *testing.T) {
	binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}
	for name, cache := range map[string]*builder.Cache{
		"shared without image":      sharedCache("b", "10Gi"),
		"per replica without image": perReplicaCache("cache-1", "", "10Gi"),
		"none":                      withPopulator(&builder.Cache{Mode: embedopsv1.CacheModeNone}, "p:1"),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := builder.PopulateJob(server("s"), binding, cache, builder.Facts{})
			g.Expect(err).To(MatchError(ContainSubstring("a populate Job needs a cache with a populator image")))
		})
	}
}

func TestPerReplicaPopulateJobOnlyResolvesTheRevision(t *testing.T) {
	g := NewWithT(t)
	s := server("s", fixtures.WithModel("BAAI/bge-large-en-v1.5", "main"), fixtures.WithToken("hf", "token"),
		fixtures.WithEnv(corev1.EnvVar{Name: "HF_ENDPOINT", Value: "http://mirror"}),
		fixtures.WithPodTemplate(map[string]any{"spec": map[string]any{
			"nodeSelector":     map[string]any{"gpu": "a100"},
			"imagePullSecrets": []any{map[string]any{"name": "private"}},
		}}))
	binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "bge-1", Namespace: "ns", UID: "uid-1"}}
	cache := withPopulator(perReplicaCache("cache-1", "", "10Gi"), "embedops-controller:1")
	g.Expect(builder.ResolvesFirst(s, cache)).To(BeTrue())

	job, err := builder.PopulateJob(s, binding, cache, builder.Facts{})

	g.Expect(err).NotTo(HaveOccurred())
	pod := job.Spec.Template.Spec
	g.Expect(pod.Volumes).To(BeEmpty(), "a PerReplica binding has no claim of its own to mount")
	g.Expect(pod.NodeSelector).To(BeEmpty(), "it needs none of the server's nodes")
	g.Expect(pod.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "private"}), "pulled as the server's images are")
	resolve := pod.Containers[0]
	g.Expect(resolve.Name).To(Equal(builder.PopulateContainerName), "the controller reads its termination message as a populate container's")
	g.Expect(resolve.Command).To(Equal([]string{"/embedops", "populate", "--model", "BAAI/bge-large-en-v1.5",
		"--revision", "main", "--image", embedopsv1.DefaultImage, "--resolve-only", "--termination-log", "/dev/termination-log"}),
		"it lists what the init containers cache for the server's image")
	g.Expect(resolve.VolumeMounts).To(BeEmpty())
	g.Expect(resolve.Env).To(ConsistOf(secretEnv("HF_TOKEN", "hf", "token"), corev1.EnvVar{Name: "HF_ENDPOINT", Value: "http://mirror"}),
		"the hub, the token and the network settings are the downloader's")
	g.Expect(resolve.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageReadFile))
}

func TestResolvesFirstOnlyWhileTheCommitIsUnknown(t *testing.T) {
	commit := strings.Repeat("a", 40)
	populated := func(resolved string) *builder.Cache {
		cache := withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1")
		cache.ResolvedCommit = resolved
		return cache
	}
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
		cache  *builder.Cache
		want   bool
	}{
		{"branch, nothing recorded", server("s"), populated(""), true},
		{"branch, commit recorded", server("s"), populated(commit), false},
		{"commit revision", server("s", fixtures.WithModel("org/m", commit)), populated(""), false},
		{"no populator", server("s"), perReplicaCache("cache-1", "", "10Gi"), false},
		{"shared", server("s"), withPopulator(sharedCache("b", "10Gi"), "p:1"), false},
		{"no cache", server("s"), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(builder.ResolvesFirst(tc.server, tc.cache)).To(Equal(tc.want))
		})
	}
}

func TestPopulateJobNameFitsAJobNameForTheLongestBinding(t *testing.T) {
	g := NewWithT(t)
	// The longest model name admission allows, in a Shared cache, under the
	// last suffix a decision's binding may take.
	longest := fixtures.EmbeddingServer(testNamespace, "tei", fixtures.WithDefaults(),
		fixtures.WithCacheMode(embedopsv1.CacheModeShared),
		fixtures.WithModel(strings.Repeat("o", 128)+"/"+strings.Repeat("m", 127), "main"))
	d, err := decision.For(longest)
	g.Expect(err).NotTo(HaveOccurred())
	names := map[string]string{}
	for n := 1; n <= decision.MaxBindingSuffix; n++ {
		binding := decision.BindingNameAt(decision.BindingName(d), n)
		job := builder.PopulateJobName(binding)
		g.Expect(len(job)).To(BeNumerically("<=", 63), "Job %s of binding %s", job, binding)
		g.Expect(validation.IsDNS1123Label(job)).To(BeEmpty(), job)
		g.Expect(names).NotTo(HaveKey(job), "two bindings share Job %s", job)
		names[job] = binding
	}
	g.Expect(builder.PopulateJobName("short")).To(Equal("short-populate"), "a name that fits is kept readable")
}

func TestPopulatorIsPulledIfNotPresentEvenAsLatest(t *testing.T) {
	g := NewWithT(t)
	binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}
	for _, cache := range []*builder.Cache{
		withPopulator(sharedCache("b", "10Gi"), "embedops-controller:latest"),
		withPopulator(perReplicaCache("cache-1", "", "10Gi"), "embedops-controller:latest"),
	} {
		job, err := builder.PopulateJob(server("s"), binding, cache, builder.Facts{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(job.Spec.Template.Spec.Containers[0].ImagePullPolicy).To(Equal(corev1.PullIfNotPresent),
			"the API server would default :latest to Always and need the registry")
	}
	sts, err := builder.StatefulSet(server("s"), withPopulator(perReplicaCache("cache-1", "", "10Gi"), "embedops-controller:latest"), builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sts.Spec.Template.Spec.InitContainers[0].ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
}

// Every Job starts a replacement pod only once the last one has
// terminated, never two on the claim at once; only the Job that fills a
// claim prunes it: the resolve Job mounts none and the verify Job reads a
// user's claim.
func TestPopulateJobsReplaceOnlyFailedPods(t *testing.T) {
	commit := strings.Repeat("a", 40)
	existing := withPopulator(existingCache("models"), "p:1")
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
		cache  *builder.Cache
		prunes bool
	}{
		{"fills a Shared claim", server("s"), withPopulator(sharedCache("b", "10Gi"), "p:1"), true},
		{"resolves a PerReplica revision", server("s"), withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), false},
		{"verifies an existing claim", server("s", fixtures.WithModel("org/m", commit)), existing, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			binding := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}

			job, err := builder.PopulateJob(tc.server, binding, tc.cache, builder.Facts{})

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(job.Spec.PodReplacementPolicy).To(HaveValue(Equal(batchv1.Failed)))
			g.Expect(job.Spec.PodFailurePolicy).To(BeNil(), "with one, Failed would be the only policy the API server accepts")
			command := job.Spec.Template.Spec.Containers[0].Command
			if tc.prunes {
				g.Expect(command).To(ContainElement(builder.PruneFlag))
			} else {
				g.Expect(command).NotTo(ContainElement(builder.PruneFlag))
			}
		})
	}
}
