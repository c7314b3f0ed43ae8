package builder_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func TestStatefulSetMetadata(t *testing.T) {
	cases := []struct {
		name         string
		server       *embedopsv1.EmbeddingServer
		wantReplicas int32
	}{
		{"one replica", server("minimal"), 1},
		{"two replicas", server("pair", fixtures.WithReplicas(2)), 2},
		{"scaled to zero", server("idle", fixtures.WithReplicas(0)), 0},
		{"replicas unset", server("unset", func(s *embedopsv1.EmbeddingServer) { s.Spec.Replicas = nil }), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(tc.server, nil, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sts.APIVersion).To(Equal("apps/v1"))
			g.Expect(sts.Kind).To(Equal("StatefulSet"))
			g.Expect(sts.Name).To(Equal(tc.server.Name))
			g.Expect(sts.Namespace).To(Equal(testNamespace))
			g.Expect(sts.OwnerReferences).To(BeEmpty())
			g.Expect(sts.Labels).To(Equal(builder.Labels(tc.server)))
			g.Expect(sts.Spec.Replicas).To(HaveValue(Equal(tc.wantReplicas)))
			g.Expect(sts.Spec.ServiceName).To(Equal(tc.server.Name + "-pods"))
			g.Expect(sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
			g.Expect(sts.Spec.Selector.MatchLabels).To(Equal(builder.StatefulSetSelectorLabels(tc.server)))
			for _, key := range builder.TrackingKeys {
				g.Expect(sts.Spec.Selector.MatchLabels).NotTo(HaveKey(key), "the StatefulSet controller copies the selector onto its claims")
			}
			g.Expect(labels.SelectorFromSet(sts.Spec.Selector.MatchLabels).Matches(labels.Set(sts.Spec.Template.Labels))).To(BeTrue())
			g.Expect(sts.Spec.Template.Labels).To(Equal(builder.Labels(tc.server)))
			g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue(embedopsv1.NameLabel, tc.server.Name))
			g.Expect(sts.Spec.Template.Annotations).To(HaveKeyWithValue("kubectl.kubernetes.io/default-container", "embedding"))
		})
	}
}

func TestStatefulSetContainer(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	cases := []struct {
		name        string
		server      *embedopsv1.EmbeddingServer
		wantImage   string
		wantPolicy  corev1.PullPolicy
		wantPort    int32
		wantAccount string
		wantSecrets []corev1.LocalObjectReference
		wantLimits  corev1.ResourceList
	}{
		{
			name:      "defaults",
			server:    server("minimal"),
			wantImage: embedopsv1.DefaultImage,
			wantPort:  8080,
		},
		{
			name: "image, port, account and GPU",
			server: server("gpu",
				withImage("registry.example/tei:1.9", corev1.PullAlways, "pull-a", "pull-b"),
				fixtures.WithPort(3000),
				withServiceAccount("embeddings"),
				withResources(nil, corev1.ResourceList{gpu: resource.MustParse("2")})),
			wantImage:   "registry.example/tei:1.9",
			wantPolicy:  corev1.PullAlways,
			wantPort:    3000,
			wantAccount: "embeddings",
			wantSecrets: []corev1.LocalObjectReference{{Name: "pull-a"}, {Name: "pull-b"}},
			wantLimits:  corev1.ResourceList{gpu: resource.MustParse("2")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(tc.server, nil, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			pod := sts.Spec.Template.Spec
			g.Expect(pod.Containers).To(HaveLen(1))
			c := pod.Containers[0]
			g.Expect(c.Name).To(Equal(builder.ContainerName))
			g.Expect(c.Image).To(Equal(tc.wantImage))
			g.Expect(c.ImagePullPolicy).To(Equal(tc.wantPolicy))
			g.Expect(c.Ports).To(Equal([]corev1.ContainerPort{
				{Name: "http", ContainerPort: tc.wantPort, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9000, Protocol: corev1.ProtocolTCP},
			}), "TEI's Prometheus port is PROMETHEUS_PORT, 9000 by default")
			g.Expect(c.Resources.Limits).To(Equal(tc.wantLimits))
			g.Expect(pod.ServiceAccountName).To(Equal(tc.wantAccount))
			g.Expect(pod.ImagePullSecrets).To(Equal(tc.wantSecrets))
			g.Expect(pod.EnableServiceLinks).To(HaveValue(BeFalse()))
		})
	}
}

func TestStatefulSetArgs(t *testing.T) {
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
		want   []string
	}{
		{
			name:   "managed flags only",
			server: server("minimal"),
			want:   []string{"--model-id=BAAI/bge-small-en-v1.5", "--revision=main", "--port=8080", "--hostname=0.0.0.0", "--json-output"},
		},
		{
			name:   "pinned revision, other port, extra args last",
			server: server("s", fixtures.WithModel("BAAI/bge-large-en-v1.5", "d4aa6901"), fixtures.WithPort(9000), fixtures.WithArgs("--dtype=float16", "--pooling", "cls")),
			want: []string{
				"--model-id=BAAI/bge-large-en-v1.5", "--revision=d4aa6901", "--port=9000", "--hostname=0.0.0.0",
				"--json-output", "--dtype=float16", "--pooling", "cls",
			},
		},
		{
			name:   "local model path",
			server: server("s", fixtures.WithModel("/models/bge", "main")),
			want:   []string{"--model-id=/models/bge", "--revision=main", "--port=8080", "--hostname=0.0.0.0", "--json-output"},
		},
		{
			name:   "json output asked for in args is not repeated",
			server: server("s", fixtures.WithArgs("--json-output")),
			want:   []string{"--model-id=BAAI/bge-small-en-v1.5", "--revision=main", "--port=8080", "--hostname=0.0.0.0", "--json-output"},
		},
		{
			name:   "JSON_OUTPUT in env is left to decide",
			server: server("s", fixtures.WithEnv(corev1.EnvVar{Name: "JSON_OUTPUT", Value: "false"})),
			want:   []string{"--model-id=BAAI/bge-small-en-v1.5", "--revision=main", "--port=8080", "--hostname=0.0.0.0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(tc.server, nil, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			c := embeddingContainer(sts.Spec.Template)
			g.Expect(c.Args).To(Equal(tc.want))
			g.Expect(c.Command).To(BeEmpty(), "the image's entrypoint runs TEI")
		})
	}
}

func TestStatefulSetEnv(t *testing.T) {
	hubCache := corev1.EnvVar{Name: "HUGGINGFACE_HUB_CACHE", Value: "/data"}
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
		want   []corev1.EnvVar
	}{
		{
			name:   "cache location only",
			server: server("minimal"),
			want:   []corev1.EnvVar{hubCache},
		},
		{
			name:   "token from its Secret, never its value",
			server: server("s", fixtures.WithToken("hf-token", "token")),
			want:   []corev1.EnvVar{hubCache, secretEnv("HF_TOKEN", "hf-token", "token")},
		},
		{
			name: "spec.env after the managed variables, in order",
			server: server("s", fixtures.WithToken("hf", "t"), fixtures.WithEnv(
				corev1.EnvVar{Name: "RUST_LOG", Value: "debug"},
				secretEnv("API_KEY", "hf", "api-key"))),
			want: []corev1.EnvVar{
				hubCache, secretEnv("HF_TOKEN", "hf", "t"),
				{Name: "RUST_LOG", Value: "debug"}, secretEnv("API_KEY", "hf", "api-key"),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(tc.server, nil, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(embeddingContainer(sts.Spec.Template).Env).To(Equal(tc.want))
		})
	}
}

func TestStatefulSetProbes(t *testing.T) {
	sts, err := builder.StatefulSet(server("minimal"), nil, builder.Facts{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	c := embeddingContainer(sts.Spec.Template)
	window := func(p *corev1.Probe) time.Duration {
		return time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second
	}
	health := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}}
	cases := []struct {
		name      string
		probe     *corev1.Probe
		handler   corev1.ProbeHandler
		minWindow time.Duration
		maxWindow time.Duration
	}{
		{"startup waits for a long download", c.StartupProbe, health, time.Hour, 2 * time.Hour},
		{"readiness reacts quickly", c.ReadinessProbe, health, 10 * time.Second, time.Minute},
		{"liveness sees a dead backend's prompt 503 as quickly as readiness", c.LivenessProbe, health, window(c.ReadinessProbe), window(c.ReadinessProbe)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.probe).NotTo(BeNil())
			g.Expect(tc.probe.ProbeHandler).To(Equal(tc.handler))
			g.Expect(tc.probe.TimeoutSeconds).To(BeNumerically(">=", 1))
			g.Expect(tc.probe.SuccessThreshold).To(Equal(int32(1)))
			g.Expect(window(tc.probe)).To(And(BeNumerically(">=", tc.minWindow), BeNumerically("<=", tc.maxWindow)))
		})
	}
}

// TestLivenessWaitsOutABusyServerAndRestartsADeadOne checks the numbers
// builder.LivenessProbe's comment derives: a busy TEI answers /health late,
// a dead one answers 503 at once.
func TestLivenessWaitsOutABusyServerAndRestartsADeadOne(t *testing.T) {
	sts, err := builder.StatefulSet(server("minimal"), nil, builder.Facts{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	c := embeddingContainer(sts.Spec.Template)
	seconds := func(s int32) time.Duration { return time.Duration(s) * time.Second }
	cases := []struct {
		name  string
		check func(g Gomega)
	}{
		{"a busy server may answer after readiness gave up on it", func(g Gomega) {
			g.Expect(seconds(c.LivenessProbe.TimeoutSeconds)).To(BeNumerically(">", seconds(c.ReadinessProbe.PeriodSeconds*c.ReadinessProbe.FailureThreshold)))
		}},
		{"a busy server may answer late at least a minute", func(g Gomega) {
			g.Expect(seconds(c.LivenessProbe.TimeoutSeconds)).To(BeNumerically(">=", time.Minute))
		}},
		{"a dead backend is restarted within the bound: the failures, then the kill", func(g Gomega) {
			failures := seconds(c.LivenessProbe.PeriodSeconds * c.LivenessProbe.FailureThreshold)
			kill := seconds(corev1.DefaultTerminationGracePeriodSeconds)
			g.Expect(sts.Spec.Template.Spec.TerminationGracePeriodSeconds).To(BeNil(), "the bound counts the API default")
			g.Expect(c.LivenessProbe.TerminationGracePeriodSeconds).To(BeNil(), "the bound counts the pod's grace period")
			g.Expect(builder.DeadBackendRestartBound).To(Equal(failures + kill))
			g.Expect(builder.DeadBackendRestartBound).To(BeNumerically("<=", 2*time.Minute))
		}},
		{"the kill leaves TEI time after the drain", func(g Gomega) {
			g.Expect(seconds(corev1.DefaultTerminationGracePeriodSeconds)).To(BeNumerically(">", seconds(int32(c.Lifecycle.PreStop.Sleep.Seconds))))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(NewWithT(t)) })
	}
}

func TestStatefulSetIsRestricted(t *testing.T) {
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
		cache  *builder.Cache
	}{
		{"per-replica cache", server("minimal"), perReplicaCache("cache-1", "", "10Gi")},
		{"shared cache", server("shared"), sharedCache("claim", "10Gi")},
		{"patched pod", server("patched", fixtures.WithPodTemplate(`{"spec":{"containers":[{"name":"embedding","env":[{"name":"A","value":"b"}]}]}}`)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(tc.server, tc.cache, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			pod := sts.Spec.Template.Spec.SecurityContext
			g.Expect(pod).NotTo(BeNil())
			g.Expect(pod.RunAsNonRoot).To(HaveValue(BeTrue()))
			g.Expect(pod.RunAsUser).To(HaveValue(BeNumerically(">", 0)), "TEI images run as root unless told otherwise")
			g.Expect(pod.FSGroup).To(HaveValue(Equal(int64(1000))))
			g.Expect(pod.SeccompProfile).To(Equal(&corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}))
			c := embeddingContainer(sts.Spec.Template).SecurityContext
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
			g.Expect(c.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
			g.Expect(c.Capabilities.Add).To(BeEmpty())
			g.Expect(c.RunAsNonRoot).To(HaveValue(BeTrue()))
			g.Expect(c.Privileged).To(BeNil())
		})
	}
}

func TestStatefulSetFillsSchemaDefaults(t *testing.T) {
	g := NewWithT(t)
	undefaulted := server("minimal", func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Model.Revision, s.Spec.Image, s.Spec.Port, s.Spec.Replicas = "", "", 0, nil
	})
	cache := perReplicaCache("cache-1", "", "10Gi")
	g.Expect(render(g, undefaulted, cache)).To(Equal(render(g, server("minimal"), cache)))
}

func TestStatefulSetIsDeterministicAndDoesNotAlias(t *testing.T) {
	options := []fixtures.Option{
		fixtures.WithArgs("--dtype=float16"), fixtures.WithEnv(corev1.EnvVar{Name: "A", Value: "1"}),
		withResources(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, nil),
		withImage("tei:1.9", "", "pull"),
	}
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
	}{
		{"generated", server("s", options...)},
		{"patched", server("s", append(options, fixtures.WithPodTemplate(advancedPodTemplate))...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cache := perReplicaCache("cache-1", "fast", "40Gi")
			first := render(g, tc.server, cache)
			for range 20 {
				g.Expect(render(g, tc.server, cache)).To(Equal(first))
			}

			sts, err := builder.StatefulSet(tc.server, cache, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			c := embeddingContainer(sts.Spec.Template)
			c.Args[len(c.Args)-1] = "changed"
			c.Env[len(c.Env)-1].Value = "changed"
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
			sts.Spec.Template.Spec.ImagePullSecrets[0].Name = "changed"
			sts.Spec.VolumeClaimTemplates[0].Spec.AccessModes[0] = corev1.ReadOnlyMany
			sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
			g.Expect(render(g, tc.server, cache)).To(Equal(first), "the StatefulSet must not share memory with the server or the cache")
		})
	}
}
