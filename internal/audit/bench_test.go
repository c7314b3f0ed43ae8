package audit

import (
	"context"
	"flag"
	"fmt"
	"testing"
)

// benchCommits is the length of BenchmarkOriginSearch's history.
var benchCommits = flag.Int("audit.commits", 1000, "commits in BenchmarkOriginSearch's history")

// longHistory is a linear history of n commits: the first introduces the
// search server, every 100th scales it (a build, no decision change), and
// the rest edit unrelated files. It returns the saved repository and the
// commit ids.
func longHistory(b *testing.B, n int) (*gitops, int) {
	h := newHistory(b)
	g := &gitops{}
	g.commits = append(g.commits, h.commit("Add the search server",
		write("README.md", "# fleet\n"),
		write("base/kustomization.yaml", baseKustomization),
		write("base/embeddingserver.yaml", baseServer),
		write(overlayPath+"/kustomization.yaml", overlayKustomization),
		write(overlayPath+"/search-patch.yaml", overlayPatch(1, "10Gi"))))
	scalings := 0
	for i := 1; i < n; i++ {
		if i%100 == 0 {
			scalings++
			g.commits = append(g.commits, h.commit("Scale search",
				write(overlayPath+"/search-patch.yaml", overlayPatch(1+scalings%9, "10Gi"))))
			continue
		}
		note := fmt.Sprintf("docs/note-%02d.md", i%50)
		g.commits = append(g.commits, h.commit("Edit "+note, write(note, fmt.Sprintf("revision %d\n", i))))
	}
	g.dir, g.repo = h.save()
	return g, scalings
}

func BenchmarkOriginSearch(b *testing.B) {
	repo, scalings := longHistory(b, *benchCommits)
	head := repo.commits[len(repo.commits)-1]
	binding := bindingFor(b, prodServer("10Gi"), head)
	opened, err := OpenRepository(context.Background(), RepositoryOptions{Path: repo.dir})
	if err != nil {
		b.Fatal(err)
	}
	var res Result
	for b.Loop() {
		res = Audit(context.Background(), opened, binding, Options{})
	}
	if res.Result != Verified || res.OriginCommit != repo.commits[0] {
		b.Fatalf("got %s (origin %s, reason %q), want Verified from %s", res.Result, res.OriginCommit, res.Reason, repo.commits[0])
	}
	if want := min(scalings+1, 9); res.Renders < want || res.Renders >= res.CommitsWalked {
		b.Fatalf("%d renders for %d commits, want at least %d and fewer than the commits", res.Renders, res.CommitsWalked, want)
	}
	b.ReportMetric(float64(res.Renders), "renders/op")
	b.ReportMetric(float64(res.CommitsWalked), "commits/op")
}
