package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// TestDevPatchesBuildWithKustomize builds the examples with the real
// node's patches as kustomize does: every server gets HF_ENDPOINT, its own
// env stays, and advanced asks for maxCPURequest.
func TestDevPatchesBuildWithKustomize(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join("..", "..", "examples")
	servers, err := exampleServers(dir)
	g.Expect(err).NotTo(HaveOccurred())
	fs := filesys.MakeFsInMemory()
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	for _, entry := range entries {
		if entry.Type().IsRegular() {
			data, err := os.ReadFile(filepath.Join(dir, entry.Name()))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fs.WriteFile(filepath.Join("/examples", entry.Name()), data)).To(Succeed())
		}
	}
	original, err := fs.ReadFile("/examples/" + kustomizationFile)
	g.Expect(err).NotTo(HaveOccurred())
	patched, changes, err := devPatches(string(original), servers)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).To(ContainElement("advanced's CPU request 2 -> 1"))
	g.Expect(fs.WriteFile("/examples/"+kustomizationFile, []byte(patched))).To(Succeed())

	built, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/examples")
	g.Expect(err).NotTo(HaveOccurred())
	rendered := map[string]embedopsv1.EmbeddingServer{}
	for _, r := range built.Resources() {
		if r.GetKind() != "EmbeddingServer" {
			continue
		}
		data, err := r.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		var server embedopsv1.EmbeddingServer
		g.Expect(json.Unmarshal(data, &server)).To(Succeed())
		rendered[server.Name] = server
	}
	g.Expect(rendered).To(HaveLen(len(servers)))
	for name, server := range rendered {
		g.Expect(server.Spec.Env).To(ContainElement(corev1.EnvVar{Name: "HF_ENDPOINT", Value: hubEndpoint}), name)
	}
	advanced := rendered["advanced"]
	g.Expect(advanced.Spec.Env).To(ContainElement(HaveField("Name", "API_KEY")), "the example's own env stays")
	g.Expect(advanced.Spec.Resources.Requests.Cpu().String()).To(Equal("1"))
	g.Expect(advanced.Spec.Resources.Limits).To(HaveKey(corev1.ResourceName(gpuResource)), "the GPU stays")

	_, _, err = devPatches(patched, servers)
	g.Expect(err).To(MatchError(ContainSubstring("already has patches")))
}

// TestHubModelsServeEachRevisionAndPinnedCommits checks the hub stand-in's
// models file: a branch by its name, a pinned commit under its own id.
func TestHubModelsServeEachRevisionAndPinnedCommits(t *testing.T) {
	g := NewWithT(t)
	const pinned = "d4aa6901d3a41ba39fb536a557fa166f842b0e09"
	data, err := hubModels([]exampleServer{
		{name: "a", model: "org/a", revision: "main"},
		{name: "b", model: "org/a", revision: "main"},
		{name: "c", model: "org/c", revision: pinned},
	})
	g.Expect(err).NotTo(HaveOccurred())
	var file struct{ Models []hubModel }
	g.Expect(yaml.Unmarshal(data, &file)).To(Succeed())
	g.Expect(file.Models).To(Equal([]hubModel{
		{ID: "org/a", Branch: "main", Repository: "multi-format"},
		{ID: "org/c", Branch: "main", Commit: pinned, Repository: "multi-format"},
	}))
}

func TestUseRealNode(t *testing.T) {
	supported := func() string { return "" }
	unsupported := func() string { return "a real node needs root" }
	cases := []struct {
		mode        string
		unsupported func() string
		real        bool
		reason      string
		fails       bool
	}{
		{mode: nodeAuto, unsupported: supported, real: true},
		{mode: nodeAuto, unsupported: unsupported, reason: "a real node needs root"},
		{mode: nodeReal, unsupported: supported, real: true},
		{mode: nodeReal, unsupported: unsupported, fails: true},
		{mode: nodeKwok, unsupported: supported, reason: "-node=kwok"},
		{mode: "other", unsupported: supported, fails: true},
	}
	for _, c := range cases {
		g := NewWithT(t)
		real, reason, err := useRealNode(c.mode, c.unsupported)
		if c.fails {
			g.Expect(err).To(HaveOccurred(), c.mode)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), c.mode)
		g.Expect(real).To(Equal(c.real), c.mode)
		g.Expect(reason).To(Equal(c.reason), c.mode)
	}
}
