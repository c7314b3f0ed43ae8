package cli

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// runCLI runs the root command with args and returns stdout, stderr and the error.
func runCLI(stdin string, args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

// bindingSpecs decodes decide's output strictly as binding specs plus the
// server name, so any field a binding spec lacks fails the test.
func bindingSpecs(g Gomega, out string) []embedopsv1.ModelCacheBindingSpec {
	var decided []struct {
		Server string `json:"server"`
		embedopsv1.ModelCacheBindingSpec
	}
	g.Expect(yaml.UnmarshalStrict([]byte(out), &decided)).To(Succeed())
	specs := make([]embedopsv1.ModelCacheBindingSpec, 0, len(decided))
	for _, d := range decided {
		g.Expect(d.Server).NotTo(BeEmpty())
		specs = append(specs, d.ModelCacheBindingSpec)
	}
	return specs
}

func TestDecideReadsStandardInputAsJSON(t *testing.T) {
	g := NewWithT(t)
	manifest := "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: s, namespace: ns}\nspec:\n  model: {name: a/b}\n  cache: {mode: Shared}\n"
	out, _, err := runCLI(manifest, "decide", "-f", "-", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`"server": "ns/s"`))
	g.Expect(out).To(ContainSubstring(`"sharingDomain": "ns"`))
	g.Expect(out).To(ContainSubstring(`"ReadWriteMany"`))
}

func TestDecideSkipsServersWithoutCache(t *testing.T) {
	g := NewWithT(t)
	manifest := "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: s}\nspec:\n  model: {name: a/b}\n  cache: {mode: None}\n"
	out, errOut, err := runCLI(manifest, "decide", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("[]\n"))
	g.Expect(errOut).To(ContainSubstring("default/s: cache.mode None records no binding"))
}

func TestDecideReportsBadInput(t *testing.T) {
	cases := []struct {
		name, stdin string
		args        []string
		message     string
		usage       bool
	}{
		{"unknown format", "", []string{"decide", "-f", "-", "-o", "xml"}, `unknown output format "xml"`, true},
		{"missing file", "", []string{"decide", "-f", "does-not-exist.yaml"}, "reading does-not-exist.yaml", false},
		{"misspelt field", "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: s}\nspec:\n  modelz: {name: a/b}\n", []string{"decide", "-f", "-"}, "modelz", false},
		{"negative size", "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: s}\nspec:\n  model: {name: a/b}\n  cache: {size: -1Gi}\n", []string{"decide", "-f", "-"}, "default/s", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := runCLI(tc.stdin, tc.args...)
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			g.Expect(IsUsageError(err)).To(Equal(tc.usage))
		})
	}
}
