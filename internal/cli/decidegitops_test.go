package cli

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/audit/audittest"
)

// gitopsServer takes its class from a post-build variable or a Helm value.
const gitopsServer = `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: search
spec:
  model:
    name: BAAI/bge-small-en-v1.5
  cache:
    storageClassName: ${CLASS:=standard}
    size: 2Gi
`

// previewRepository saves a repository with apps/ for Flux and a chart for
// Argo CD, and returns its directory.
func previewRepository(t *testing.T) string {
	t.Helper()
	h := audittest.NewHistory()
	h.Commit("Serve search",
		audittest.Write("apps/server.yaml", gitopsServer),
		audittest.Write("chart/Chart.yaml", "apiVersion: v2\nname: search\nversion: 0.1.0\n"),
		audittest.Write("chart/values.yaml", "class: standard\n"),
		audittest.Write("chart/templates/server.yaml",
			"apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  model:\n    name: BAAI/bge-small-en-v1.5\n  cache:\n    storageClassName: {{ .Values.class }}\n"))
	dir := t.TempDir()
	if _, err := h.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeObject writes a manifest into a temporary file.
func writeObject(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "object.yaml")
	NewWithT(t).Expect(os.WriteFile(file, []byte(content), 0o600)).To(Succeed())
	return file
}

func TestDecidePreviewsAKustomization(t *testing.T) {
	g := NewWithT(t)
	repo := previewRepository(t)
	ks := writeObject(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}
  targetNamespace: team
  namePrefix: eu-
  postBuild:
    substitute: {CLASS: fast}
`)
	out, _, err := runCLI("", "decide", "--kustomization", ks, "--repo", repo)
	g.Expect(err).NotTo(HaveOccurred())
	specs := bindingSpecs(g, out)
	g.Expect(specs).To(HaveLen(1))
	g.Expect(specs[0].Identity.SharingDomain).To(Equal("team/eu-search"))
	g.Expect(specs[0].Decision.StorageClassName).To(Equal("fast"))
}

func TestDecidePreviewsAHelmApplication(t *testing.T) {
	g := NewWithT(t)
	repo := previewRepository(t)
	app := writeObject(t, `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: models, namespace: argocd}
spec:
  project: default
  source:
    repoURL: https://git.example.com/fleet.git
    path: chart
    helm:
      parameters: [{name: class, value: fast}]
  destination: {server: https://kubernetes.default.svc, namespace: apps}
`)
	out, _, err := runCLI("", "decide", "--application", app, "--repo", repo)
	g.Expect(err).NotTo(HaveOccurred())
	specs := bindingSpecs(g, out)
	g.Expect(specs).To(HaveLen(1))
	g.Expect(specs[0].Identity.SharingDomain).To(Equal("apps/models"))
	g.Expect(specs[0].Decision.StorageClassName).To(Equal("fast"))
}

func TestDecideRefusesWhatItCannotRender(t *testing.T) {
	g := NewWithT(t)
	repo := previewRepository(t)
	ks := writeObject(t, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  path: ./apps
  postBuild:
    substituteFrom: [{kind: Secret, name: vars}]
`)
	_, _, err := runCLI("", "decide", "--kustomization", ks, "--repo", repo)
	g.Expect(err).To(MatchError(ContainSubstring("Secret/vars")))
	_, _, err = runCLI("", "decide", "--kustomization", ks, "-f", ks)
	g.Expect(err).To(HaveOccurred(), "one input only")
}
