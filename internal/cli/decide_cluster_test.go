package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// examples is the directory decide and the cluster both read.
const examples = "../../examples"

func TestDecidePrintsWhatTheControllerRecords(t *testing.T) {
	g := NewWithT(t)
	env, _ := reconciledCluster(t)
	namespace := harness.Namespace(t, env.Client)
	applyManifests(t, g, env.Client, namespace, examples)

	out, _, err := runCLI("", "decide", "-f", examples, "-n", namespace)
	g.Expect(err).NotTo(HaveOccurred())
	var decided []decidedServer
	g.Expect(yaml.UnmarshalStrict([]byte(out), &decided)).To(Succeed())
	g.Expect(decided).To(HaveLen(3))
	for _, d := range decided {
		recorded := recordedSpec(t, g, env.Client, d.Server)
		// Provisioner and parameters digest are cluster facts, outside the
		// digest: decide cannot know them and envtest has no StorageClass.
		g.Expect(recorded.Decision.Provisioner).To(BeEmpty())
		g.Expect(asYAML(g, d.Identity)).To(MatchYAML(asYAML(g, recorded.Identity)), d.Server)
		g.Expect(asYAML(g, d.Decision)).To(MatchYAML(asYAML(g, recorded.Decision)), d.Server)
		g.Expect(d.Decision.Digest).To(Equal(recorded.Decision.Digest), d.Server)
	}
}

// recordedSpec waits for the binding the controller records for the server
// named "namespace/name" and returns its spec.
func recordedSpec(t *testing.T, g *WithT, c client.Client, server string) embedopsv1.ModelCacheBindingSpec {
	t.Helper()
	namespace, name, _ := strings.Cut(server, "/")
	key := client.ObjectKey{Namespace: namespace, Name: name}
	binding := &embedopsv1.ModelCacheBinding{}
	g.Eventually(func(g Gomega) {
		es := &embedopsv1.EmbeddingServer{}
		g.Expect(c.Get(t.Context(), key, es)).To(Succeed())
		g.Expect(es.Status.CacheBinding).NotTo(BeEmpty(), "status.cacheBinding of %s", server)
		g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: key.Namespace, Name: es.Status.CacheBinding}, binding)).To(Succeed())
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	return binding.Spec
}

// applyManifests creates every object of the YAML files in dir in namespace,
// Secrets and ConfigMaps first, as `kubectl apply -k` of the examples'
// Kustomization does (kustomize's legacy order). In file order the
// advanced server would come before its token Secret: the controller may
// look for the Secret before it exists, and then polls for it every
// progress interval (30 s), as the server's stall says.
func applyManifests(t *testing.T, g *WithT, c client.Client, namespace, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var first, rest []*unstructured.Unstructured
	for _, file := range files {
		for _, object := range readObjects(t, g, file) {
			if kind := object.GetKind(); kind == "Secret" || kind == "ConfigMap" {
				first = append(first, object)
			} else {
				rest = append(rest, object)
			}
		}
	}
	for _, object := range append(first, rest...) {
		object.SetNamespace(namespace)
		g.Expect(c.Create(t.Context(), object)).To(Succeed(), object.GetName())
	}
}

// readObjects reads the objects of a YAML file.
func readObjects(t *testing.T, g *WithT, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	var objects []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		document, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objects
		}
		g.Expect(err).NotTo(HaveOccurred())
		object := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(document, &object.Object)).To(Succeed())
		if len(object.Object) != 0 {
			objects = append(objects, object)
		}
	}
}

// asYAML is v as YAML, to compare decoded values field by field.
func asYAML(g *WithT, v any) string {
	data, err := yaml.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return string(data)
}
