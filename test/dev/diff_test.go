package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/internal/cli"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/harness"
)

// TestDiffReviewsTheDevChange runs `embedops diff` on the repository make
// dev builds: the examples seeded as up seeds them, then the commit
// `make dev-change` pushes, served by the same loopback git server and read
// through the Kustomization up creates. No cluster is started: diff reads
// git alone (--cluster=off).
func TestDiffReviewsTheDevChange(t *testing.T) {
	g := NewWithT(t)
	git, err := harness.StartGitServer(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(git.StopHTTP)
	repo, err := harness.CreateGitRepo(git, repoPath, branch)
	g.Expect(err).NotTo(HaveOccurred())
	seeded, err := seed(t.Context(), repo, filepath.Join("..", "..", "examples"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	changed, err := commitChange(t.Context(), io.Discard, repo.URL)
	g.Expect(err).NotTo(HaveOccurred())

	exprs, err := harness.ShippedHealthCheckExprs()
	g.Expect(err).NotTo(HaveOccurred())
	manifest, err := yaml.Marshal(examplesKustomization("default", exprs).Object)
	g.Expect(err).NotTo(HaveOccurred())
	kustomization := filepath.Join(t.TempDir(), "kustomization.yaml")
	g.Expect(os.WriteFile(kustomization, manifest, 0o600)).To(Succeed())
	cacheDir := t.TempDir()
	diff := func(from, to string, args ...string) (string, error) {
		var stdout bytes.Buffer
		root := cli.NewRootCommand()
		root.SetArgs(append([]string{"diff", "--kustomization", kustomization, "--repo", repo.URL, "--cache-dir", cacheDir,
			"--cluster=off", "--from", from, "--to", to}, args...))
		root.SetOut(&stdout)
		root.SetErr(io.Discard)
		err := root.Execute()
		return stdout.String(), err
	}

	out, err := diff(seeded, changed, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var report struct {
		Servers []decision.ServerChange `json:"servers"`
	}
	g.Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
	summary := map[string]string{}
	for _, s := range report.Servers {
		var actions []string
		for _, c := range s.Caches {
			actions = append(actions, string(c.Action)+" "+c.Decision.StorageClassName+" "+c.Decision.RetainFor.Duration.String())
		}
		summary[s.Server] = strings.Join(actions, ", ")
		g.Expect(s.Rolls).To(Equal(s.Server == "default/"+changedServer), s.Server)
	}
	g.Expect(summary).To(Equal(map[string]string{
		"default/minimal":      "Create fast 30s, Retire  30s",
		"default/shared-cache": "Keep  168h0m0s",
		"default/advanced":     "Keep  72h0m0s",
	}))

	out, err = diff(seeded, branch, "-o", "markdown", "--fail-on-retire")
	g.Expect(cli.ExitCode(err)).To(Equal(cli.ExitRetires), "%v", err)
	g.Expect(out).To(ContainSubstring("> [!WARNING]"))
	g.Expect(out).To(ContainSubstring("| `default/advanced` | = keep | "))
	g.Expect(out).To(ContainSubstring("`BAAI/bge-large-en-v1.5@d4aa6901d3a4`"), "a pinned commit, shortened")
	g.Expect(out).To(ContainSubstring("last used by `default/minimal`) is released 30s after its last user leaves"))
	g.Expect(out).To(ContainSubstring("Plan: 1 to create, 2 kept, 1 to retire. Rolls: `default/minimal`."))

	// HEAD of a URL is the remote's HEAD: the change, which against itself
	// changes nothing.
	out, err = diff(changed, "HEAD", "--fail-on-retire")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix(repo.URL + ": " + changed[:12] + " -> HEAD (" + changed[:12] + ")\n"))
	g.Expect(out).To(ContainSubstring("Plan: 3 kept. Rolls: none."))
}
