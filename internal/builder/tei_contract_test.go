package builder_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/tei"
	"github.com/embedops/embedops/test/fixtures"
)

// commit is a model commit a populator recorded.
const commit = "d4aa6901d3a41ba39fb536a557fa166f842b0e09"

// exampleServers are the EmbeddingServers of examples/, defaulted as the
// API server would.
func exampleServers(t *testing.T) []*embedopsv1.EmbeddingServer {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	more, _ := filepath.Glob("../../examples/*/*.yaml")
	var servers []*embedopsv1.EmbeddingServer
	for _, file := range append(files, more...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			if !strings.Contains(doc, "kind: EmbeddingServer") {
				continue
			}
			server := &embedopsv1.EmbeddingServer{}
			if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(server); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			server.Namespace = testNamespace
			fixtures.WithDefaults()(server)
			servers = append(servers, server)
		}
	}
	return servers
}

// cachesFor are the caches the controller may give server: its mode
// without a populator, with one before and after it recorded a commit.
func cachesFor(server *embedopsv1.EmbeddingServer) []*builder.Cache {
	if claim := server.Spec.Cache.ExistingClaim; claim != "" {
		verified := withPopulator(existingCache(claim), "p:1")
		verified.ResolvedCommit = commit
		return []*builder.Cache{existingCache(claim), withPopulator(existingCache(claim), "p:1"), verified}
	}
	switch server.Spec.Cache.Mode {
	case embedopsv1.CacheModeNone:
		return []*builder.Cache{nil}
	case embedopsv1.CacheModeShared:
		pinned := withPopulator(sharedCache("mcb-1", "10Gi"), "p:1")
		pinned.ResolvedCommit = commit
		return []*builder.Cache{sharedCache("mcb-1", "10Gi"), withPopulator(sharedCache("mcb-1", "10Gi"), "p:1"), pinned}
	default:
		pinned := withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1")
		pinned.ResolvedCommit = commit
		return []*builder.Cache{perReplicaCache("cache-1", "", "10Gi"), withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), pinned}
	}
}

// teiEnvironment is the environment TEI starts with in the first pod.
func teiEnvironment(container corev1.Container) map[string]string {
	return tei.ContainerEnvironment("server-0", container.Env)
}

// TestEveryTEIContainerParsesUnderTEIsCommandLine builds the StatefulSet of
// every example and test fixture, with every cache the controller may give
// it, and parses the TEI container's args and environment as TEI's router
// does (internal/tei, router/src/main.rs v1.9.3).
func TestEveryTEIContainerParsesUnderTEIsCommandLine(t *testing.T) {
	servers := exampleServers(t)
	for _, tc := range goldenCases {
		servers = append(servers, tc.server)
	}
	g := NewWithT(t)
	g.Expect(len(servers)).To(BeNumerically(">=", 8))
	for _, server := range servers {
		for _, cache := range cachesFor(server) {
			for _, facts := range []builder.Facts{{}, {IPv6: true}} {
				sts, err := builder.StatefulSet(server, cache, facts)
				g.Expect(err).NotTo(HaveOccurred(), server.Name)
				container := embeddingContainer(sts.Spec.Template)
				parsed, err := tei.Parse(container.Args, teiEnvironment(container))
				g.Expect(err).NotTo(HaveOccurred(), "server %s, cache %+v: TEI would exit with status 2", server.Name, cache)
				g.Expect(parsed).To(HaveKeyWithValue("json_output", tei.Given{Value: "true", Source: tei.CommandLine}),
					"server %s: TEI logs JSON as its image's CMD asks", server.Name)
				g.Expect(parsed["hostname"].Value).To(Equal(map[bool]string{false: "0.0.0.0", true: "::"}[facts.IPv6]))
				g.Expect(parsed["port"]).To(Equal(tei.Given{Value: "8080", Source: tei.CommandLine}), "the image's PORT=80 is overridden")
				g.Expect(parsed).NotTo(HaveKey("hf_api_token"))
				if server.Spec.Model.TokenSecretRef != nil {
					g.Expect(parsed).To(HaveKeyWithValue("hf_token", tei.Given{Value: "from-HF_TOKEN", Source: tei.Environment}))
				}
			}
		}
	}
}

// TestTheFormerTokenPairFailsTEIsCommandLine shows the contract catches the
// defect of the last release: HF_API_TOKEN beside HF_TOKEN makes TEI exit.
func TestTheFormerTokenPairFailsTEIsCommandLine(t *testing.T) {
	g := NewWithT(t)
	sts, err := builder.StatefulSet(server("s", fixtures.WithToken("hf", "token")), nil, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	container := embeddingContainer(sts.Spec.Template)
	_, err = tei.Parse(container.Args, teiEnvironment(container))
	g.Expect(err).NotTo(HaveOccurred())

	container.Env = append(container.Env, secretEnv("HF_API_TOKEN", "hf", "token"))
	_, err = tei.Parse(container.Args, teiEnvironment(container))
	var usage *tei.UsageError
	g.Expect(errors.As(err, &usage)).To(BeTrue())
	g.Expect(usage.Message).To(ContainSubstring("'--hf-token <HF_TOKEN>' cannot be used with '--hf-api-token <HF_API_TOKEN>'"))
}

// TestAPatchThatRepeatsJSONOutputFailsTEIsCommandLine shows a flag repeated
// by a patch is caught as clap catches it.
func TestAPatchThatRepeatsJSONOutputFailsTEIsCommandLine(t *testing.T) {
	g := NewWithT(t)
	sts, err := builder.StatefulSet(server("s"), nil, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	container := embeddingContainer(sts.Spec.Template)
	_, err = tei.Parse(append(container.Args, "--json-output"), teiEnvironment(container))
	g.Expect(err).To(MatchError(ContainSubstring("cannot be used multiple times")))
}
