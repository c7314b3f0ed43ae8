package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// exampleFiles lists examples/*.yaml; there must be at least the three
// starting shapes.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least three examples, found %d (%v)", len(files), err)
	}
	return files
}

func readExample(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("%s is not one YAML object: %v", path, err)
	}
	return obj
}

func TestExamplesAreAcceptedWithDefaults(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	servers := 0
	for _, path := range exampleFiles(t) {
		obj := readExample(t, path)
		obj.SetNamespace(namespace)
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatalf("%s was refused: %v", filepath.Base(path), err)
		}
		if obj.GetKind() != embedopsv1.EmbeddingServerKind {
			continue
		}
		servers++
		t.Run(filepath.Base(path), func(t *testing.T) {
			server := &embedopsv1.EmbeddingServer{}
			NewWithT(t).Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), server)).To(Succeed())
			expectDefaults(NewWithT(t), server)
		})
	}
	if servers < 3 {
		t.Fatalf("want at least three EmbeddingServer examples, found %d", servers)
	}
}

// expectDefaults checks that every schema default is filled in.
func expectDefaults(g *WithT, server *embedopsv1.EmbeddingServer) {
	spec := server.Spec
	g.Expect(spec.Model.Revision).NotTo(BeEmpty())
	g.Expect(spec.Image).NotTo(BeEmpty())
	g.Expect(spec.Port).To(Equal(int32(8080)))
	g.Expect(spec.Replicas).NotTo(BeNil())
	g.Expect(spec.Cache.Mode).To(BeElementOf(embedopsv1.CacheModePerReplica, embedopsv1.CacheModeShared))
	g.Expect(spec.Cache.Size).NotTo(BeNil())
	g.Expect(spec.Cache.Size.Sign()).To(Equal(1))
	g.Expect(spec.Cache.RetainFor).NotTo(BeNil())
	g.Expect(spec.Cache.RetainFor.Duration).To(BeNumerically(">", 0))
}

func TestMinimalServerGetsEveryDefault(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	obj := serverManifest(t, namespace, "bare", "model:\n  name: BAAI/bge-small-en-v1.5\n")
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())

	server := &embedopsv1.EmbeddingServer{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), server)).To(Succeed())
	g.Expect(server.Spec.Model.Revision).To(Equal("main"))
	g.Expect(server.Spec.Image).To(Equal(embedopsv1.DefaultImage))
	g.Expect(server.Spec.Port).To(Equal(int32(8080)))
	g.Expect(*server.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(server.Spec.Cache.Mode).To(Equal(embedopsv1.CacheModePerReplica))
	g.Expect(server.Spec.Cache.Size.Cmp(resource.MustParse("10Gi"))).To(Equal(0))
	g.Expect(server.Spec.Cache.RetainFor.Duration.String()).To(Equal("24h0m0s"))
}

// TestTypedClientGetsEveryDefault creates a server from Go with only the
// model set: zero values the Go types send must not defeat schema defaults.
func TestTypedClientGetsEveryDefault(t *testing.T) {
	g := NewWithT(t)
	server := &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Name: "typed", Namespace: harness.Namespace(t, env.Client)},
		Spec:       embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"}},
	}
	g.Expect(env.Client.Create(t.Context(), server)).To(Succeed())
	expectDefaults(g, server)
	g.Expect(server.Spec.Cache.Mode).To(Equal(embedopsv1.CacheModePerReplica))
}
