package audit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit/audittest"
)

// includingKustomization is the prod overlay of a repository whose
// GitRepository includes the platform repository's deploy/ at platform/.
const includingKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: prod
resources:
- ../../platform/base
patches:
- path: search-patch.yaml
`

// includes is a fleet repository whose overlay needs the platform
// repository's base, as a GitRepository include lays it out.
type includes struct {
	fleetDir, platformDir string
	// fleet: 0 has a README, 1 adds the overlay, 2 edits the README.
	fleet          []string
	platformCommit string
	include        embedopsv1.GitInclude
	// submodulesCommit adds a .gitmodules; vendored then adds platform/.
	submodulesCommit, vendored string
}

func newIncludes(t *testing.T) *includes {
	p := newHistory(t)
	in := &includes{}
	in.platformCommit = p.commit("Publish the search base",
		write("deploy/base/kustomization.yaml", audittest.BaseKustomization),
		write("deploy/base/embeddingserver.yaml", audittest.BaseServer),
		write("README.md", "# platform\n"))
	in.platformDir, _ = p.save()
	f := newHistory(t)
	in.fleet = append(in.fleet,
		f.commit("Initial commit", write("README.md", "# fleet\n")),
		f.commit("Serve search from the platform base",
			write(overlayPath+"/kustomization.yaml", includingKustomization),
			write(overlayPath+"/search-patch.yaml", overlayPatch(2, "10Gi"))),
		f.commit("Document the fleet", write("README.md", "# fleet\n\nProduction.\n")))
	in.submodulesCommit = f.commit("Add a submodule", write(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = ../x.git\n"))
	in.vendored = f.commit("Vendor the platform", write("platform/base/kustomization.yaml", "resources: []\n"))
	in.fleetDir, _ = f.save()
	in.include = embedopsv1.GitInclude{
		Name: "platform", Repository: "file://" + in.platformDir, Revision: "main@sha1:" + in.platformCommit,
		FromPath: "deploy", ToPath: "platform",
	}
	return in
}

// withGitSource records the GitRepository's includes and submodules.
func withGitSource(t *testing.T, inputs embedopsv1.GitSourceInputs) bindingOption {
	data, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	return withSource(func(s *embedopsv1.DecisionSource) {
		s.Render = &embedopsv1.RenderInputs{Source: string(data)}
	})
}

// audit audits a binding of the fleet's prod server at a commit, cloning
// included repositories.
func (in *includes) audit(t *testing.T, commit string, opts ...bindingOption) Result {
	binding := bindingFor(t, prodServer("10Gi"), commit, opts...)
	results := All(context.Background(), RepositoryOptions{Path: in.fleetDir, CacheDir: t.TempDir()},
		[]embedopsv1.ModelCacheBinding{*binding}, Options{})
	if len(results) != 1 {
		t.Fatalf("%d results", len(results))
	}
	return results[0]
}

func TestAuditLaysOutIncludedRepositories(t *testing.T) {
	requireUploadPack(t)
	g := NewWithT(t)
	in := newIncludes(t)

	res := in.audit(t, in.fleet[2], withGitSource(t, embedopsv1.GitSourceInputs{Include: []embedopsv1.GitInclude{in.include}}))

	g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
	g.Expect(res.Server).To(Equal("prod/search"))
	g.Expect(res.OriginCommit).To(Equal(in.fleet[1]))

	without := in.audit(t, in.fleet[2])
	g.Expect(without.Result).To(Equal(Unverifiable), "the overlay needs the included base")
}

// TestAuditIncludeFromTheRoot: an include without fromPath copies the
// included repository's whole tree to toPath.
func TestAuditIncludeFromTheRoot(t *testing.T) {
	requireUploadPack(t)
	g := NewWithT(t)
	in := newIncludes(t)
	f := newHistory(t)
	commit := f.commit("Serve search from the whole platform repository",
		write(overlayPath+"/kustomization.yaml", strings.Replace(includingKustomization, "platform/base", "vendor/platform/deploy/base", 1)),
		write(overlayPath+"/search-patch.yaml", overlayPatch(2, "10Gi")))
	in.fleetDir, _ = f.save()
	include := in.include
	include.FromPath, include.ToPath = "", "vendor/platform"

	res := in.audit(t, commit, withGitSource(t, embedopsv1.GitSourceInputs{Include: []embedopsv1.GitInclude{include}}))

	g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
}

func TestAuditRefusesIncludesItCannotLayOut(t *testing.T) {
	requireUploadPack(t)
	in := newIncludes(t)
	cases := []struct {
		name   string
		commit string
		edit   func(*embedopsv1.GitInclude)
		reason string
	}{
		{"an unreachable repository", in.fleet[2], func(i *embedopsv1.GitInclude) { i.Repository = closedURL(t) }, `include "platform": opening`},
		{"no recorded revision", in.fleet[2], func(i *embedopsv1.GitInclude) { i.Revision = "" }, "status.includedArtifacts"},
		{"an absent included GitRepository", in.fleet[2], func(i *embedopsv1.GitInclude) { i.Repository = "" }, "did not exist"},
		{"a missing fromPath", in.fleet[2], func(i *embedopsv1.GitInclude) { i.FromPath = "nope" }, `"nope" does not exist`},
		{"a toPath leaving the artifact", in.fleet[2], func(i *embedopsv1.GitInclude) { i.ToPath = "../x" }, "cannot copy"},
		{"a toPath the commit has", in.vendored, func(*embedopsv1.GitInclude) {}, "cannot copy onto it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			include := in.include
			tc.edit(&include)

			res := in.audit(t, tc.commit, withGitSource(t, embedopsv1.GitSourceInputs{Include: []embedopsv1.GitInclude{include}}))

			g.Expect(res.Result).To(Equal(Unverifiable), res.Reason)
			g.Expect(res.Reason).To(ContainSubstring(tc.reason))
		})
	}
}

// withGitlink commits, on top of parent, the gitlink of a submodule at
// path, linking commit, and returns the new commit's id.
func withGitlink(t *testing.T, repo *git.Repository, parent, path, commit string) string {
	t.Helper()
	g := NewWithT(t)
	c, err := repo.CommitObject(plumbing.NewHash(parent))
	g.Expect(err).NotTo(HaveOccurred())
	into := &overlay{written: repo.Storer}
	tree, err := into.graft(c.TreeHash, strings.Split(path, "/"), object.TreeEntry{Mode: filemode.Submodule, Hash: plumbing.NewHash(commit)})
	g.Expect(err).NotTo(HaveOccurred())
	linked := &object.Commit{Author: c.Author, Committer: c.Committer, Message: "Link the platform submodule",
		TreeHash: tree, ParentHashes: []plumbing.Hash{c.Hash}}
	obj := repo.Storer.NewEncodedObject()
	g.Expect(linked.Encode(obj)).To(Succeed())
	hash, err := repo.Storer.SetEncodedObject(obj)
	g.Expect(err).NotTo(HaveOccurred())
	return hash.String()
}

// TestAuditChecksOutSubmodules: with recurseSubmodules, a submodule is
// checked out at its gitlink's commit, a relative URL resolved against the
// repository's; without, the overlay's base is missing.
func TestAuditChecksOutSubmodules(t *testing.T) {
	requireUploadPack(t)
	in := newIncludes(t)
	cases := []struct {
		name     string
		url      string
		recurse  bool
		result   Outcome
		contains string
	}{
		{"recursing", "file://" + in.platformDir, true, Verified, ""},
		{"not recursing", "file://" + in.platformDir, false, Unverifiable, "vendor/platform/deploy/base"},
		{"a relative URL", "../platform.git", true, Unverifiable, "opening https://git.example.com/platform.git"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newHistory(t)
			parent := f.commit("Serve search from the platform submodule",
				write(".gitmodules", "[submodule \"platform\"]\n\tpath = vendor/platform\n\turl = "+tc.url+"\n"),
				write(overlayPath+"/kustomization.yaml", strings.Replace(includingKustomization, "platform/base", "vendor/platform/deploy/base", 1)),
				write(overlayPath+"/search-patch.yaml", overlayPatch(2, "10Gi")))
			dir, repo := f.save()
			in.fleetDir = dir
			commit := withGitlink(t, repo, parent, "vendor/platform", in.platformCommit)

			res := in.audit(t, commit, withGitSource(t, embedopsv1.GitSourceInputs{RecurseSubmodules: tc.recurse}))

			g.Expect(res.Result).To(Equal(tc.result), "reason: %s, differences: %v", res.Reason, res.Differences)
			g.Expect(res.Reason).To(ContainSubstring(tc.contains))
			if tc.result == Verified {
				g.Expect(res.OriginCommit).To(Equal(commit), "the commit before has no gitlink")
			}
		})
	}
}

// TestGraftWritesTheTreeGitWould: laying a tree into a commit's gives the
// tree git commits for the same files, so entries are ordered as git
// orders them ("a-b" before "a/" before "a0").
func TestGraftWritesTheTreeGitWould(t *testing.T) {
	g := NewWithT(t)
	files := []change{write("a-b", "1"), write("a0", "2"), write("z/y", "3")}
	included := newHistory(t)
	includedCommit := included.commit("included", write("x.yaml", "4"))
	_, includedRepo := included.save()
	bare := newHistory(t)
	bareCommit := bare.commit("bare", files...)
	_, bareRepo := bare.save()
	full := newHistory(t)
	fullCommit := full.commit("full", append(files, write("a/b/x.yaml", "4"))...)
	_, fullRepo := full.save()

	tree := func(repo *git.Repository, commit string) *object.Tree {
		c, err := repo.CommitObject(plumbing.NewHash(commit))
		g.Expect(err).NotTo(HaveOccurred())
		root, err := c.Tree()
		g.Expect(err).NotTo(HaveOccurred())
		return root
	}
	o := newOverlay(bareRepo.Storer)
	o.bases = append(o.bases, includedRepo.Storer)
	hash, err := o.graft(tree(bareRepo, bareCommit).Hash, []string{"a", "b"},
		object.TreeEntry{Mode: filemode.Dir, Hash: tree(includedRepo, includedCommit).Hash})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hash).To(Equal(tree(fullRepo, fullCommit).Hash))
}
