package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/test/harness"
)

// serverManifest renders an EmbeddingServer with the given spec YAML.
func serverManifest(t *testing.T, namespace, name, spec string) *unstructured.Unstructured {
	t.Helper()
	manifest := "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata:\n  name: " + name + "\n  namespace: " + namespace + "\nspec:\n" + indent(spec, "  ")
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("parsing the test manifest: %v\n%s", err, manifest)
	}
	return obj
}

func indent(text, prefix string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, line := range lines {
		lines[i] = prefix + line
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestEmbeddingServerRefusesInvalidSpecs(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	const model = "model:\n  name: BAAI/bge-small-en-v1.5\n"
	cases := []struct {
		name, objectName, spec, message string
	}{
		{"model name missing", "s", "model:\n  revision: main\n", "spec.model.name: Required value"},
		{"model name with spaces", "s", "model:\n  name: not a repo\n", "spec.model.name: Invalid value"},
		{"token ref without key", "s", "model:\n  name: a/b\n  tokenSecretRef:\n    name: hf\n", "spec.model.tokenSecretRef.key: Required value"},
		{"token ref without name", "s", "model:\n  name: a/b\n  tokenSecretRef:\n    key: token\n", "spec.model.tokenSecretRef.name: Required value"},
		{"port out of range", "s", model + "port: 70000\n", "spec.port: Invalid value: 70000: spec.port in body should be less than or equal to 65535"},
		{"negative replicas", "s", model + "replicas: -1\n", "spec.replicas in body should be greater than or equal to 0"},
		{"unknown cache mode", "s", model + "cache:\n  mode: Local\n", `spec.cache.mode: Unsupported value: "Local"`},
		{"no cache with a storage class", "s", model + "cache:\n  mode: None\n  storageClassName: fast\n", "cache.mode None keeps no cache: remove storageClassName"},
		{"no cache with a size", "s", model + "cache:\n  mode: None\n  size: 20Gi\n", "cache.mode None keeps no cache: remove size"},
		{"no cache with a lifetime", "s", model + "cache:\n  mode: None\n  retainFor: 1h\n", "cache.mode None keeps no cache: remove retainFor"},
		{"negative cache size", "s", model + "cache:\n  size: -1Gi\n", "cache.size must be greater than zero"},
		{"zero cache size", "s", model + "cache:\n  size: \"0\"\n", "cache.size must be greater than zero"},
		{"cache size not a quantity", "s", model + "cache:\n  size: lots\n", "spec.cache.size"},
		{"lifetime in days", "s", model + "cache:\n  retainFor: 1d\n", "spec.cache.retainFor in body should match"},
		{"model id in args", "s", model + "args: [\"--model-id=other\"]\n", "args must not set --model-id, --revision, --port (-p) or --hostname"},
		{"cache location in env", "s", model + "env:\n- name: HUGGINGFACE_HUB_CACHE\n  value: /tmp\n", "env must not set HUGGINGFACE_HUB_CACHE"},
		{"token in env and secret ref", "s", "model:\n  name: a/b\n  tokenSecretRef: {name: hf, key: token}\nenv:\n- name: HF_TOKEN\n  value: x\n", "env must not set HF_TOKEN or HF_API_TOKEN when model.tokenSecretRef is set"},
		{"both token variables in env", "s", model + "env:\n- name: HF_TOKEN\n  value: a\n- name: HF_API_TOKEN\n  value: b\n", "env must not set both HF_TOKEN and HF_API_TOKEN"},
		{"token flag and secret ref", "s", "model:\n  name: a/b\n  tokenSecretRef: {name: hf, key: token}\nargs: [\"--hf-api-token=x\"]\n", "args must not set --hf-token or --hf-api-token when model.tokenSecretRef is set"},
		{"short port flag in args", "s", model + "args: [\"-p\", \"80\"]\n", "args must not set --model-id, --revision, --port (-p) or --hostname"},
		{"CA bundle of an unknown kind", "s", "model:\n  name: a/b\n  caBundleRef: {kind: Volume, name: ca}\n", `spec.model.caBundleRef.kind: Unsupported value: "Volume"`},
		{"CA bundle without a name", "s", "model:\n  name: a/b\n  caBundleRef: {kind: Secret}\n", "spec.model.caBundleRef.name: Required value"},
		{"CA bundle and SSL_CERT_FILE", "s", "model:\n  name: a/b\n  caBundleRef: {name: ca}\nenv:\n- name: SSL_CERT_FILE\n  value: /x\n", "env must not set SSL_CERT_FILE when model.caBundleRef is set"},
		{"duplicate env names", "s", model + "env:\n- name: A\n  value: x\n- name: A\n  value: y\n", `spec.env[1]: Duplicate value`},
		{"unknown pull policy", "s", model + "imagePullPolicy: Sometimes\n", `spec.imagePullPolicy: Unsupported value: "Sometimes"`},
		{"image with spaces", "s", model + "image: \"my image\"\n", "spec.image in body should match"},
		{"pod template not an object", "s", model + "podTemplate: \"spec: {}\"\n", "spec.podTemplate: Invalid value"},
		{"name with a dot", "my.server", model, "metadata.name must be a DNS-1035 label of at most 52 characters"},
		{"name too long for a StatefulSet", strings.Repeat("a", 53), model, "metadata.name must be a DNS-1035 label of at most 52 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(t.Context(), serverManifest(t, namespace, tc.objectName, tc.spec))
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid server")
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestEmbeddingServerDefaultsTheCABundleRef(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	for i, value := range []string{"http://proxy.corp:3128", ""} {
		t.Run(value, func(t *testing.T) {
			spec := "model:\n  name: a/b\n  caBundleRef: {name: ca}\nenv:\n- name: HTTPS_PROXY\n  value: \"" + value + "\"\n"
			obj := serverManifest(t, namespace, fmt.Sprintf("ca-%d", i), spec)
			NewWithT(t).Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
			kind, _, _ := unstructured.NestedString(obj.Object, "spec", "model", "caBundleRef", "kind")
			key, _, _ := unstructured.NestedString(obj.Object, "spec", "model", "caBundleRef", "key")
			NewWithT(t).Expect([]string{kind, key}).To(Equal([]string{"ConfigMap", "ca.crt"}))
		})
	}
}

func TestEmbeddingServerNoneCacheKeepsDefaultsOnly(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	obj := serverManifest(t, namespace, "ephemeral", "model:\n  name: a/b\ncache:\n  mode: None\n")
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
	mode, _, _ := unstructured.NestedString(obj.Object, "spec", "cache", "mode")
	g.Expect(mode).To(Equal("None"))
}
