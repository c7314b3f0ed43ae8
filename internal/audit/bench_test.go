package audit

import (
	"context"
	"flag"
	"testing"

	"github.com/embedops/embedops/internal/audit/audittest"
)

// benchCommits is the length of BenchmarkOriginSearch's history.
var benchCommits = flag.Int("audit.commits", 1000, "commits in BenchmarkOriginSearch's history")

func BenchmarkOriginSearch(b *testing.B) {
	repo, err := audittest.NewLongHistory(b.TempDir(), *benchCommits)
	if err != nil {
		b.Fatal(err)
	}
	head := repo.Commits[len(repo.Commits)-1]
	binding := bindingFor(b, prodServer("10Gi"), head)
	opened, err := OpenRepository(context.Background(), RepositoryOptions{Path: repo.Dir})
	if err != nil {
		b.Fatal(err)
	}
	var res Result
	for b.Loop() {
		res = Audit(context.Background(), opened, binding, Options{})
	}
	if res.Result != Verified || res.OriginCommit != repo.Commits[0] {
		b.Fatalf("got %s (origin %s, reason %q), want Verified from %s", res.Result, res.OriginCommit, res.Reason, repo.Commits[0])
	}
	if want := min(repo.Scalings+1, 9); res.Renders < want || res.Renders >= res.CommitsWalked {
		b.Fatalf("%d renders for %d commits, want at least %d and fewer than the commits", res.Renders, res.CommitsWalked, want)
	}
	b.ReportMetric(float64(res.Renders), "renders/op")
	b.ReportMetric(float64(res.CommitsWalked), "commits/op")
}
