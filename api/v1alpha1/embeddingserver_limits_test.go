package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/test/harness"
)

// The size limits of an EmbeddingServer's spec.
const (
	maxModelName    = 256
	maxRevision     = 255
	maxImage        = 512
	maxArgs         = 64
	maxArg          = 1024
	maxEnv          = 128
	maxEnvName      = 256
	maxEnvValue     = 32768
	maxPullSecrets  = 16
	maxObjectName   = 253
	maxResourceList = 32
	maxRetainFor    = "8760h"
)

// hugeExponentTimeout bounds the admission of a size with a huge exponent:
// expanding 1e100000000 would keep the API server busy for minutes.
const hugeExponentTimeout = 10 * time.Second

// yamlList renders n list items made by item, one per line.
func yamlList(key string, n int, item func(i int) string) string {
	var b strings.Builder
	b.WriteString(key + ":\n")
	for i := range n {
		b.WriteString("- " + item(i) + "\n")
	}
	return b.String()
}

// resourceList renders n entries of spec.resources.<kind>, indented under
// "resources:".
func resourceList(kind string, n int) string {
	var b strings.Builder
	b.WriteString("  " + kind + ":\n")
	for i := range n {
		fmt.Fprintf(&b, "    example.com/device-%d: \"1\"\n", i)
	}
	return b.String()
}

// Items of the lists and maps above.
func envItem(i int) string  { return fmt.Sprintf("{name: V%d, value: x}", i) }
func argItem(i int) string  { return fmt.Sprintf("--flag-%d", i) }
func pullItem(i int) string { return fmt.Sprintf("{name: pull-%d}", i) }

func TestEmbeddingServerRefusesOversizedSpecs(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	const model = "model:\n  name: a/b\n"
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct{ name, spec, message string }{
		{"model name", "model:\n  name: a/" + long(maxModelName-1) + "\n", "spec.model.name: Too long: may not be more than 256"},
		{"model revision", model + "  revision: " + long(maxRevision+1) + "\n", "spec.model.revision: Too long: may not be more than 255"},
		{"token Secret name", model + "  tokenSecretRef: {name: " + long(maxObjectName+1) + ", key: token}\n", "spec.model.tokenSecretRef.name: Too long"},
		{"token Secret key", model + "  tokenSecretRef: {name: hf, key: " + long(maxObjectName+1) + "}\n", "spec.model.tokenSecretRef.key: Too long"},
		{"image", model + "image: " + long(maxImage+1) + "\n", "spec.image: Too long: may not be more than 512"},
		{"too many args", model + yamlList("args", maxArgs+1, argItem), "spec.args: Too many: 65: must have at most 64 items"},
		{"an arg", model + "args: [--" + long(maxArg) + "]\n", "spec.args[0]: Too long: may not be more than 1024"},
		{"too many env", model + yamlList("env", maxEnv+1, envItem), "spec.env: Too many: 129: must have at most 128 items"},
		{"an env name", model + "env: [{name: " + long(maxEnvName+1) + ", value: x}]\n", "env names must be at most 256 characters"},
		{"an env value", model + "env: [{name: A, value: " + long(maxEnvValue+1) + "}]\n", "env values must be at most 32768 characters"},
		{"too many pull Secrets", model + yamlList("imagePullSecrets", maxPullSecrets+1, pullItem), "spec.imagePullSecrets: Too many: 17: must have at most 16 items"},
		{"a pull Secret name", model + "imagePullSecrets: [{name: " + long(maxObjectName+1) + "}]\n", "imagePullSecrets names must be at most 253 characters"},
		{"too many limits", model + "resources:\n" + resourceList("limits", maxResourceList+1), "resources may have at most 32 requests, 32 limits and 16 claims"},
		{"too many requests", model + "resources:\n" + resourceList("requests", maxResourceList+1), "resources may have at most 32 requests, 32 limits and 16 claims"},
		{"service account name", model + "serviceAccountName: " + long(maxObjectName+1) + "\n", "spec.serviceAccountName: Too long"},
		{"storage class name", model + "cache:\n  storageClassName: " + long(maxObjectName+1) + "\n", "spec.cache.storageClassName: Too long"},
		{"too many replicas", model + "replicas: 1001\n", "spec.replicas in body should be less than or equal to 1000"},
		{"cache size of 10E", model + "cache:\n  size: 10E\n", "cache.size must be less than 8Ei"},
		{"cache size of 2^63 bytes", model + "cache:\n  size: \"9223372036854775808\"\n", "cache.size must be less than 8Ei"},
		{"cache size with a long mantissa", model + "cache:\n  size: \"1" + strings.Repeat("0", 32) + "\"\n", "cache.size must be at most 32 characters"},
		{"cache size with a huge exponent", model + "cache:\n  size: \"1e100000000\"\n", "cache.size must be at most 32 characters with an exponent of at most two digits"},
		{"cache size with a tiny exponent", model + "cache:\n  size: \"1e-100000000\"\n", "cache.size must be at most 32 characters with an exponent of at most two digits"},
		{"retainFor past a year", model + "cache:\n  retainFor: 8761h\n", "cache.retainFor must be at most 8760h (365 days)"},
		{"retainFor past time.Duration", model + "cache:\n  retainFor: 9999999999h\n", "cache.retainFor must be at most 8760h (365 days)"},
		{"retainFor written long", model + "cache:\n  retainFor: " + strings.Repeat("1m", 17) + "\n", "spec.cache.retainFor: Too long: may not be more than 32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(t.Context(), hugeExponentTimeout)
			defer cancel()
			err := env.Client.Create(ctx, serverManifest(t, namespace, "s", tc.spec))
			g.Expect(err).To(HaveOccurred(), "the API server accepted an oversized server")
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

// TestEmbeddingServerAcceptsSpecsAtTheLimits shows the limits refuse only
// what is past them.
func TestEmbeddingServerAcceptsSpecsAtTheLimits(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	long := func(n int) string { return strings.Repeat("a", n) }
	spec := "model:\n  name: a/" + long(maxModelName-2) + "\n  revision: " + long(maxRevision) + "\n" +
		"  tokenSecretRef: {name: " + long(maxObjectName) + ", key: " + long(maxObjectName) + "}\n" +
		"image: " + long(maxImage) + "\n" +
		yamlList("args", maxArgs-1, argItem) + "- --" + long(maxArg-2) + "\n" +
		yamlList("env", maxEnv-2, envItem) + "- {name: " + long(maxEnvName) + ", value: x}\n- {name: B, value: " + long(maxEnvValue) + "}\n" +
		yamlList("imagePullSecrets", maxPullSecrets-1, pullItem) + "- {name: " + long(maxObjectName) + "}\n" +
		"resources:\n" + resourceList("limits", maxResourceList) + resourceList("requests", maxResourceList) +
		"serviceAccountName: " + long(maxObjectName) + "\n" +
		"replicas: 1000\n" +
		"cache:\n  storageClassName: " + long(maxObjectName) + "\n  size: 8191Pi\n  retainFor: " + maxRetainFor + "\n"
	NewWithT(t).Expect(env.Client.Create(t.Context(), serverManifest(t, namespace, "s", spec))).To(Succeed())

	for _, size := range []string{"\"9223372036854775807\"", "50e9", "1.5Ti", "9E"} {
		obj := serverManifest(t, namespace, "s", "model:\n  name: a/b\ncache:\n  size: "+size+"\n")
		obj.SetName("")
		obj.SetGenerateName("size-")
		NewWithT(t).Expect(env.Client.Create(t.Context(), obj)).To(Succeed(), "size %s", size)
	}
}
