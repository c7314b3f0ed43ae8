package cli

import (
	"encoding/json"
	"runtime/debug"
	"testing"

	. "github.com/onsi/gomega"
)

func TestVersionPrintsTheStampedVersionAndCommit(t *testing.T) {
	g := NewWithT(t)
	version, commit = "v0.3.0", "0123456789abcdef0123456789abcdef01234567"
	t.Cleanup(func() { version, commit = "", "" })

	out, _, err := runCLI("", "version")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("embedops v0.3.0 (commit 0123456789abcdef0123456789abcdef01234567)\n"))

	out, _, err = runCLI("", "version", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var info versionInfo
	g.Expect(json.Unmarshal([]byte(out), &info)).To(Succeed())
	g.Expect(info).To(Equal(versionInfo{Version: "v0.3.0", Commit: "0123456789abcdef0123456789abcdef01234567"}))
}

func TestVCSRevisionMarksADirtyTree(t *testing.T) {
	g := NewWithT(t)
	g.Expect(vcsRevision([]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}})).To(Equal("abc-dirty"))
	g.Expect(vcsRevision([]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}})).To(Equal("abc"))
	g.Expect(vcsRevision(nil)).To(BeEmpty())
	g.Expect(fill(versionInfo{})).To(Equal(versionInfo{Version: "(devel)", Commit: "unknown"}))
}

func TestTheKubectlPluginNamesItselfAsKubectlDoes(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NewRootCommandAs("/usr/local/bin/kubectl-embedops").DisplayName()).To(Equal("kubectl embedops"))
	g.Expect(NewRootCommandAs("/usr/local/bin/embedops").DisplayName()).To(Equal("embedops"))
	g.Expect(NewRootCommandAs("kubectl-embedops").UsageString()).To(ContainSubstring("kubectl embedops [command]"))
}

func TestCompletionScriptsAreGenerated(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run(shell, func(t *testing.T) {
			g := NewWithT(t)
			out, _, err := runCLI("", "completion", shell)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("embedops"))
		})
	}
}
