package audit

import (
	"context"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/kustomize/kyaml/openapi"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// rootOf returns a commit's root tree.
func rootOf(g Gomega, repo *git.Repository, commit string) *object.Tree {
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	g.Expect(err).NotTo(HaveOccurred())
	root, err := c.Tree()
	g.Expect(err).NotTo(HaveOccurred())
	return root
}

func TestRenderReusesBuildsWhoseReadsAreUnchanged(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	r := newRenderer(newObjects(repo.repo.Storer))
	at := func(i int) *rendering { return r.render(rootOf(g, repo.repo, repo.commits[i]), overlayPath, plain{}) }

	scaled := at(4)
	g.Expect(scaled.err).NotTo(HaveOccurred())
	g.Expect(string(scaled.resources)).To(ContainSubstring("replicas: 3"))
	introduced := at(3)
	g.Expect(introduced).NotTo(BeIdenticalTo(scaled), "the patch differs")
	g.Expect(string(introduced.resources)).To(ContainSubstring("replicas: 2"))
	g.Expect(at(2)).To(BeIdenticalTo(introduced), "the dashboard is not read by the build")
	g.Expect(at(1)).To(BeIdenticalTo(introduced), "the README is not read by the build")
	g.Expect(r.renders).To(Equal(2))

	g.Expect(at(0).err).To(MatchError(errPathNotFound))
	g.Expect(at(4)).To(BeIdenticalTo(scaled), "an earlier build is found again")
	g.Expect(r.renders).To(Equal(3))
}

func TestRenderRebuildsWhenAnInputChanges(t *testing.T) {
	plainServer := "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: plain}\nspec: {model: {name: org/m}}\n"
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"
	setup := []change{
		write("base/kustomization.yaml", baseKustomization),
		write("base/embeddingserver.yaml", baseServer),
		write(overlayPath+"/kustomization.yaml", overlayKustomization),
		write(overlayPath+"/search-patch.yaml", overlayPatch(1, "10Gi")),
		write("plain/server.yaml", plainServer),
	}
	cases := []struct {
		name    string
		dir     string
		edit    change
		rebuilt bool
	}{
		{name: "a referenced base file", dir: overlayPath, edit: write("base/embeddingserver.yaml", baseServer+"  port: 9000\n"), rebuilt: true},
		{name: "a file next to the base", dir: overlayPath, edit: write("base/README.md", "base\n")},
		{name: "a kustomization appearing in the base's parent", dir: overlayPath, edit: write("kustomization.yaml", "resources: [base]\n")},
		{name: "a manifest added to a plain directory", dir: "plain", edit: write("plain/cm.yaml", configMap), rebuilt: true},
		{name: "a manifest added below a plain directory", dir: "plain", edit: write("plain/more/cm.yaml", configMap), rebuilt: true},
		{name: "a kustomization added to a plain directory", dir: "plain", edit: write("plain/kustomization.yaml", "resources: [server.yaml]\n"), rebuilt: true},
		{name: "a file beside a plain directory", dir: "plain", edit: write("plain.yaml", configMap)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHistory(t)
			before := h.commit("Set up", setup...)
			after := h.commit("Edit", tc.edit)
			_, repo := h.save()
			r := newRenderer(newObjects(repo.Storer))
			first := r.render(rootOf(g, repo, before), tc.dir, plain{})
			g.Expect(first.err).NotTo(HaveOccurred())
			second := r.render(rootOf(g, repo, after), tc.dir, plain{})
			g.Expect(second.err).NotTo(HaveOccurred())
			if !tc.rebuilt {
				g.Expect(second).To(BeIdenticalTo(first))
				return
			}
			g.Expect(r.renders).To(Equal(2))
			fresh := build(newTreeFS(rootOf(g, repo, after), newObjects(repo.Storer)), tc.dir)
			g.Expect(second.resources).To(Equal(fresh.resources), "a reused build must equal a fresh one")
		})
	}
}

func TestBuildRecordsOnlyWhatKustomizeReads(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	fs := newTreeFS(rootOf(g, repo.repo, repo.commits[4]), newObjects(repo.repo.Storer))
	built := build(fs, overlayPath)
	g.Expect(built.err).NotTo(HaveOccurred())
	g.Expect(fs.accesses).To(HaveKey(access{kind: fileAccess, path: overlayPath + "/search-patch.yaml"}))
	g.Expect(fs.accesses).To(HaveKey(access{kind: fileAccess, path: "base/embeddingserver.yaml"}))
	for a := range fs.accesses {
		g.Expect(a.path).To(Or(HavePrefix(overlayPath), HavePrefix("base")), "read %v", a)
		g.Expect(a.kind).NotTo(Equal(treeAccess), "a kustomization build lists no directory")
	}
	g.Expect(fs.listed).NotTo(HaveKey("monitoring"), "unread directories are not copied")
}

func TestAuditRendersPlainDirectoriesLikeKustomizeController(t *testing.T) {
	g := NewWithT(t)
	h := newHistory(t)
	server := `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata: {name: plain}
spec:
  model: {name: intfloat/e5-small}
  cache: {mode: Shared, size: 5Gi}
`
	commit := h.commit("Plain manifests",
		write("apps/team/server.yaml", server),
		write("apps/team/notes.txt", "not a manifest"),
		write("apps/team/extra/config.yml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n"),
		write("apps/team/kustomized/kustomization.yaml", "resources: [cm.yaml]\nnamePrefix: k-\n"),
		write("apps/team/kustomized/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"),
		write("apps/team/kustomized/ignored.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ignored}\n"))
	_, repo := h.save()

	fs := newTreeFS(rootOf(g, repo, commit), newObjects(repo.Storer))
	built := build(fs, "apps/team")
	g.Expect(built.err).NotTo(HaveOccurred())
	out := string(built.resources)
	g.Expect(out).To(ContainSubstring("name: plain"))
	g.Expect(out).To(ContainSubstring("name: extra"), "manifests in subdirectories are included")
	g.Expect(out).To(ContainSubstring("name: k-cm"), "a subdirectory with a kustomization is built by it")
	g.Expect(out).NotTo(ContainSubstring("name: ignored"))

	servers, err := decision.ServersFromYAML([]byte(server), "team")
	g.Expect(err).NotTo(HaveOccurred())
	binding := bindingFor(t, servers[0], commit, withSource(func(s *embedopsv1.DecisionSource) { s.Path = "apps/team/" }))
	binding.Namespace = "team"
	res := Audit(context.Background(), repo, binding, Options{})
	g.Expect(res.Result).To(Equal(Verified), "reason: %s %v", res.Reason, res.Differences)
	g.Expect(res.Server).To(Equal("team/plain"), "a server without a namespace takes the binding's")
	g.Expect(res.OriginCommit).To(Equal(commit))
}

func TestBuildRestoresTheDefaultOpenAPISchema(t *testing.T) {
	g := NewWithT(t)
	h := newHistory(t)
	commit := h.commit("Pinned schema",
		write("app/kustomization.yaml", "openapi: {version: v1.21.2}\nresources: [cm.yaml]\n"),
		write("app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"))
	_, repo := h.save()
	fs := newTreeFS(rootOf(g, repo, commit), newObjects(repo.Storer))
	g.Expect(build(fs, "app").err).NotTo(HaveOccurred())
	g.Expect(fs.openAPI).To(BeTrue())
	g.Expect(openapi.GetSchemaVersion()).To(Equal(openapi.DefaultOpenAPI))
}

func TestRelativeResolvesPathsAsTheInMemoryFilesystem(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{in: "", ok: false},
		{in: "/", want: ".", ok: true},
		{in: ".", want: ".", ok: true},
		{in: "/base/kustomization.yaml", want: "base/kustomization.yaml", ok: true},
		{in: "/clusters/prod/../../base", want: "base", ok: true},
		{in: "base/", want: "base", ok: true},
		{in: "../base", ok: false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := relative(tc.in)
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestGlobDirIsTheDirectoryBeforeTheFirstWildcard(t *testing.T) {
	cases := map[string]string{
		"/apps/*.yaml":     "/apps",
		"/apps/a?/x.yaml":  "/apps",
		"/apps/b/c.yaml":   "/apps/b/c.yaml",
		"*.yaml":           "/",
		"/[ab]/x.yaml":     "/",
		"/apps/team/*/*.y": "/apps/team",
	}
	for pattern, want := range cases {
		t.Run(pattern, func(t *testing.T) {
			NewWithT(t).Expect(globDir(pattern)).To(Equal(want))
		})
	}
}
