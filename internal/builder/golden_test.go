package builder_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the builder's output")

// advancedPodTemplate is examples/advanced.yaml's patch plus a patch of the
// TEI container's environment.
const advancedPodTemplate = `{
  "metadata": {"annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}},
  "spec": {
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"nvidia.com/gpu.present": "true"},
    "containers": [{
      "name": "embedding",
      "env": [{"name": "RUST_LOG", "value": "info,text_embeddings_router=debug"}]
    }]
  }
}`

// goldenCases render the examples the way the controller would.
var goldenCases = []struct {
	name   string
	server *embedopsv1.EmbeddingServer
	cache  *builder.Cache
}{
	{
		name:   "minimal",
		server: server("minimal"),
		cache:  perReplicaCache("cache-4f1c2b7a9e", "", "10Gi"),
	},
	{
		name: "shared-cache",
		server: server("shared-cache",
			fixtures.WithModel("intfloat/multilingual-e5-small", "main"),
			fixtures.WithToken("hf-token", "token"),
			fixtures.WithReplicas(2),
			withCacheSpec(embedopsv1.CacheModeShared, "", "20Gi")),
		cache: sharedCache("mcb-models-multilingual-e5-small-8d2e61a0", "20Gi"),
	},
	{
		name:   "no-cache",
		server: server("no-cache", withCacheSpec(embedopsv1.CacheModeNone, "", "10Gi")),
		cache:  nil,
	},
	{
		name: "advanced",
		server: server("advanced",
			fixtures.WithModel("BAAI/bge-large-en-v1.5", "d4aa6901d3a41ba39fb536a557fa166f842b0e09"),
			fixtures.WithToken("hf-token", "token"),
			withImage("ghcr.io/huggingface/text-embeddings-inference:1.9", corev1.PullIfNotPresent, "registry-credentials"),
			withServiceAccount("embeddings"),
			fixtures.WithArgs("--max-batch-tokens=32768", "--dtype=float16"),
			fixtures.WithEnv(secretEnv("API_KEY", "hf-token", "api-key")),
			withResources(
				corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
				corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi"), "nvidia.com/gpu": resource.MustParse("1")}),
			withCacheSpec(embedopsv1.CacheModePerReplica, "fast-ssd", "40Gi"),
			fixtures.WithPodTemplate(advancedPodTemplate)),
		cache: withPopulator(perReplicaCache("cache-b93e07d1c5", "fast-ssd", "40Gi"), "embedops-controller:0.1.0"),
	},
}

func TestChildrenMatchGoldenFiles(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := render(g, tc.server, tc.cache)
			path := filepath.Join("testdata", tc.name+".golden.yaml")
			if *update {
				g.Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./internal/builder -update to create it")
			g.Expect(string(got)).To(Equal(string(want)), "run go test ./internal/builder -update if the change is intended")
		})
	}
}

// render returns the children of a server as one YAML stream.
func render(g *WithT, server *embedopsv1.EmbeddingServer, cache *builder.Cache) []byte {
	statefulSet, err := builder.StatefulSet(server, cache, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	var out bytes.Buffer
	for i, obj := range []any{statefulSet, builder.Service(server), builder.HeadlessService(server)} {
		data, err := yaml.Marshal(obj)
		g.Expect(err).NotTo(HaveOccurred())
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(data)
	}
	return out.Bytes()
}
