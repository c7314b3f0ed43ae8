package upgrade

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
)

func TestReadBaselineFile(t *testing.T) {
	commit := "d93fe1cce95f6a02077451fe4196754763d24a0e"
	for _, tc := range []struct {
		name, file, want, err string
	}{
		{name: "comments and one commit", file: "# how to move it\n\n" + commit + "\n", want: commit},
		{name: "no commit", file: "# only comments\n", err: "names 0 commits"},
		{name: "two commits", file: commit + "\n" + commit + "\n", err: "names 2 commits"},
		{name: "an abbreviated commit", file: "d93fe1c\n", err: "not a full commit id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			g.Expect(os.MkdirAll(filepath.Join(root, filepath.Dir(BaselineFile)), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(root, BaselineFile), []byte(tc.file), 0o600)).To(Succeed())
			got, err := ReadBaselineFile(root)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// TestOpenBaselineInAShallowCloneSaysToFetchTheHistory: a clone cut before
// the baseline fails with what to run, rather than skipping the upgrade.
func TestOpenBaselineInAShallowCloneSaysToFetchTheHistory(t *testing.T) {
	g := NewWithT(t)
	origin := t.TempDir()
	repo, err := git.PlainInit(origin, false)
	g.Expect(err).NotTo(HaveOccurred())
	tree, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.MkdirAll(filepath.Join(origin, "config"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(origin, "config", "crd.yaml"), []byte("kind: CustomResourceDefinition\n"), 0o600)).To(Succeed())
	_, err = tree.Add("config/crd.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	signature := &object.Signature{Name: "a", Email: "a@example.com", When: time.Unix(0, 0)}
	release, err := tree.Commit("the previous release", &git.CommitOptions{Author: signature})
	g.Expect(err).NotTo(HaveOccurred())
	head, err := tree.Commit("a change after it", &git.CommitOptions{Author: signature, AllowEmptyCommits: true})
	g.Expect(err).NotTo(HaveOccurred())

	full, err := OpenBaseline(origin, release.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(full.Subject).To(Equal("the previous release"))
	files, err := full.Files("config")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveKeyWithValue("config/crd.yaml", []byte("kind: CustomResourceDefinition\n")))

	_, err = OpenBaseline(origin, "0123456789abcdef0123456789abcdef01234567")
	g.Expect(err).To(MatchError(ContainSubstring("is not in the repository's history")))

	shallow := t.TempDir()
	_, err = git.PlainClone(shallow, false, &git.CloneOptions{URL: "file://" + origin, Depth: 1})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = OpenBaseline(shallow, head.String())
	g.Expect(err).NotTo(HaveOccurred(), "the clone holds its one commit")
	_, err = OpenBaseline(shallow, release.String())
	g.Expect(err).To(MatchError(And(ContainSubstring("shallow clone"), ContainSubstring("git fetch --unshallow"))))
}
