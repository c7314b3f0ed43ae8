package audit

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

func TestOpenRepositoryOpensLocalRepositories(t *testing.T) {
	repo := newGitops(t)
	workTree := t.TempDir()
	if _, err := git.PlainInit(workTree, false); err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(workTree, "clusters", "prod")
	if err := os.MkdirAll(nested, 0o750); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"bare": repo.dir, "work tree": workTree, "inside a work tree": nested}
	for name, dir := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			opened, err := OpenRepository(context.Background(), RepositoryOptions{Path: dir, URL: "https://unused.example.com/x.git"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(opened).NotTo(BeNil())
		})
	}
}

func TestOpenRepositoryRefusesIncompleteOptions(t *testing.T) {
	cases := []struct {
		name    string
		opts    RepositoryOptions
		message string
	}{
		{name: "nothing", opts: RepositoryOptions{}, message: "no repository"},
		{name: "no cache directory", opts: RepositoryOptions{URL: "https://git.example.com/x.git"}, message: "no cache directory"},
		{name: "not a repository", opts: RepositoryOptions{Path: t.TempDir()}, message: "repository does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := OpenRepository(context.Background(), tc.opts)
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
		})
	}
}

func TestAllClonesAndReusesTheRecordedRepository(t *testing.T) {
	requireUploadPack(t)
	g := NewWithT(t)
	repo := newGitops(t)
	url := "file://" + repo.dir
	binding := bindingFor(t, prodServer("10Gi"), repo.commits[4], withSource(func(s *embedopsv1.DecisionSource) { s.Repository = url }))
	opts := RepositoryOptions{CacheDir: t.TempDir(), Credentials: Credentials{Username: "u", Password: "p"}}

	results := All(context.Background(), opts, []embedopsv1.ModelCacheBinding{*binding}, Options{})
	g.Expect(results).To(ConsistOf(HaveField("Result", Verified)))
	g.Expect(results[0].OriginCommit).To(Equal(repo.commits[1]))
	clones, err := filepath.Glob(filepath.Join(opts.CacheDir, "*.git"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clones).To(ConsistOf(cloneDir(opts.CacheDir, url)))

	opts.URL = url
	again, err := OpenRepository(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred(), "a cached clone is fetched, not cloned again")
	head, err := again.Reference("refs/remotes/origin/main", true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head.Hash().String()).To(Equal(repo.commits[5]))
}

func TestCloneDirIsOnePerURL(t *testing.T) {
	g := NewWithT(t)
	g.Expect(cloneDir("/c", "https://a/x.git")).To(Equal(cloneDir("/c", "https://a/x.git")))
	g.Expect(cloneDir("/c", "https://a/x.git")).NotTo(Equal(cloneDir("/c", "https://a/y.git")))
	g.Expect(filepath.Dir(cloneDir("/c", "../../etc"))).To(Equal("/c"))
}

func TestDisplayURLHidesPasswords(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DisplayURL("https://ada:hunter2@git.example.com/fleet.git")).To(Equal("https://ada:xxxxx@git.example.com/fleet.git"))
	g.Expect(DisplayURL("https://git.example.com/fleet.git")).To(Equal("https://git.example.com/fleet.git"))
	g.Expect(DisplayURL("git@github.com:org/fleet.git")).To(Equal("git@github.com:org/fleet.git"))
	g.Expect(DisplayURL("/srv/git/fleet.git")).To(Equal("/srv/git/fleet.git"))
}
