package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/audit/audittest"
)

// OriginReport is the origin search benchmark's result: one audit of a
// binding recorded at the head of a linear history whose decision
// originates at its first commit.
type OriginReport struct {
	// Commits is the history's length.
	Commits int `json:"commits"`
	// CommitsWalked and Renders are the audit's own counts.
	CommitsWalked int `json:"commitsWalked"`
	Renders       int `json:"renders"`
	// Seconds is the audit's wall time, the history already on disk.
	Seconds float64 `json:"seconds"`
	// GenerateSeconds is how long writing the history took.
	GenerateSeconds float64 `json:"generateSeconds"`
	// Result is the audit's verdict, Verified when the search worked.
	Result audit.Outcome `json:"result"`
}

// RunOriginSearch writes the history of audittest.NewLongHistory with
// commits commits into a temporary directory and audits the head binding
// once, as BenchmarkOriginSearch does.
func RunOriginSearch(ctx context.Context, commits int) (*OriginReport, error) {
	dir, err := os.MkdirTemp("", "embedops-bench-history-")
	if err != nil {
		return nil, fmt.Errorf("creating the history directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	generating := time.Now()
	history, err := audittest.NewLongHistory(dir, commits)
	if err != nil {
		return nil, err
	}
	report := &OriginReport{Commits: commits, GenerateSeconds: round(time.Since(generating).Seconds())}
	binding, err := audittest.Binding(audittest.ProdServer("10Gi"), history.Commits[len(history.Commits)-1])
	if err != nil {
		return nil, err
	}
	repo, err := audit.OpenRepository(ctx, audit.RepositoryOptions{Path: dir})
	if err != nil {
		return nil, err
	}
	auditing := time.Now()
	res := audit.Audit(ctx, repo, binding, audit.Options{})
	report.Seconds = round(time.Since(auditing).Seconds())
	report.CommitsWalked, report.Renders, report.Result = res.CommitsWalked, res.Renders, res.Result
	if res.Result != audit.Verified || res.OriginCommit != history.Commits[0] {
		return report, fmt.Errorf("got %s (origin %s, reason %q), want Verified from the first commit %s", res.Result, res.OriginCommit, res.Reason, history.Commits[0])
	}
	return report, nil
}

// Rows lays the report out as a table.
func (r *OriginReport) Rows() []Row {
	return []Row{
		{"commits", fmt.Sprint(r.Commits), "linear history; the decision originates at the first commit"},
		{"commitsWalked", fmt.Sprint(r.CommitsWalked), ""},
		{"seconds", seconds(r.Seconds), "one audit: verify the head and search back to the origin"},
		{"renders", fmt.Sprint(r.Renders), "kustomize builds; unchanged inputs reuse a build"},
		{"result", string(r.Result), ""},
		{"generateSeconds", seconds(r.GenerateSeconds), "writing the history (not part of seconds)"},
	}
}
