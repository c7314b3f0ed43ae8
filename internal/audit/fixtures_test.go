package audit

import (
	"testing"

	"github.com/go-git/go-git/v5"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit/audittest"
)

// epoch is when the first commit of a test history is authored.
var epoch = audittest.Epoch

// history is an audittest.History that fails the test on the first error
// and saves into a temporary directory.
type history struct {
	*audittest.History
	tb testing.TB
}

// newHistory starts an empty history.
func newHistory(tb testing.TB) *history {
	return &history{History: audittest.NewHistory(), tb: tb}
}

// commit applies changes, commits them and returns the commit id.
func (h *history) commit(subject string, changes ...change) string {
	h.tb.Helper()
	id := h.Commit(subject, changes...)
	if err := h.Err(); err != nil {
		h.tb.Fatal(err)
	}
	return id
}

// save writes the history into a bare repository in a temporary directory.
func (h *history) save() (string, *git.Repository) {
	h.tb.Helper()
	dir := h.tb.TempDir()
	repo, err := h.Save(dir)
	if err != nil {
		h.tb.Fatal(err)
	}
	return dir, repo
}

// change edits the files of the next commit.
type change = audittest.Change

// write sets a file's content; remove deletes every file under a path.
var write, remove = audittest.Write, audittest.Remove

// The GitOps layout the tests audit (see audittest).
const (
	overlayPath          = audittest.OverlayPath
	baseKustomization    = audittest.BaseKustomization
	baseServer           = audittest.BaseServer
	overlayKustomization = audittest.OverlayKustomization
)

// overlayPatch is the overlay's strategic-merge patch of the server.
var overlayPatch = audittest.OverlayPatch

// gitops is the standard history, commit ids by position: 0 has only a
// README; 1 introduces the server (10Gi); 2 and 3 touch unrelated files; 4
// scales the server (no decision change); 5 grows the cache to 20Gi.
type gitops struct {
	dir     string
	repo    *git.Repository
	commits []string
}

func newGitops(tb testing.TB) *gitops {
	h := newHistory(tb)
	g := &gitops{}
	g.commits = append(g.commits,
		h.commit("Initial commit", write("README.md", "# fleet\n")),
		h.commit("Add the search server",
			write("base/kustomization.yaml", baseKustomization),
			write("base/embeddingserver.yaml", baseServer),
			write(overlayPath+"/kustomization.yaml", overlayKustomization),
			write(overlayPath+"/search-patch.yaml", overlayPatch(2, "10Gi"))),
		h.commit("Document the fleet", write("README.md", "# fleet\n\nProduction servers.\n")),
		h.commit("Add a dashboard", write("monitoring/dashboard.yaml", "kind: ConfigMap\n")),
		h.commit("Scale search to 3 replicas", write(overlayPath+"/search-patch.yaml", overlayPatch(3, "10Gi"))),
		h.commit("Grow the search cache", write(overlayPath+"/search-patch.yaml", overlayPatch(3, "20Gi"))),
	)
	g.dir, g.repo = h.save()
	return g
}

// prodServer is the server the overlay renders, written out by hand.
var prodServer = audittest.ProdServer

// bindingOption edits a binding fixture.
type bindingOption func(*embedopsv1.ModelCacheBinding)

// bindingFor is the binding the controller records for a server's decision
// at a commit of overlayPath.
func bindingFor(tb testing.TB, server *embedopsv1.EmbeddingServer, commit string, opts ...bindingOption) *embedopsv1.ModelCacheBinding {
	tb.Helper()
	b, err := audittest.Binding(server, commit)
	if err != nil {
		tb.Fatal(err)
	}
	for _, opt := range opts {
		opt(b)
	}
	return b
}

// withSource edits the recorded source.
func withSource(edit func(*embedopsv1.DecisionSource)) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) { edit(&b.Spec.Source) }
}

// withDecision edits the recorded decision, leaving its digest alone.
func withDecision(edit func(*embedopsv1.CacheDecision)) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) { edit(&b.Spec.Decision) }
}
