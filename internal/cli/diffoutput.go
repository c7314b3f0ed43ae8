package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// diffRow is one cache of one server, as the table and markdown print it.
type diffRow struct {
	server, action, binding, model, cache, retainFor, download, rolls string
}

// printDiff writes the report as a table, JSON or markdown.
func printDiff(out io.Writer, format string, report *diffReport) error {
	switch format {
	case outputJSON:
		return printStructured(out, outputJSON, report)
	case outputMarkdown:
		return printDiffMarkdown(out, report)
	default:
		return printDiffTable(out, report)
	}
}

// printDiffTable writes an aligned table and a summary line, as a plan
// tool does.
func printDiffTable(out io.Writer, report *diffReport) error {
	fmt.Fprintf(out, "%s: %s -> %s\n\n", report.Repository, revisionOf(report.From), revisionOf(report.To))
	if len(report.Servers) > 0 {
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "SERVER\tACTION\tBINDING\tMODEL\tCACHE\tRETAIN FOR\tDOWNLOAD\tROLLS")
		for _, row := range diffRows(report, func(s string) string { return s }) {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.server, row.action, row.binding, row.model,
				row.cache, row.retainFor, row.download, row.rolls)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	for _, note := range conditions(report, func(s string) string { return s }) {
		fmt.Fprintln(out, note)
	}
	_, err := fmt.Fprintln(out, summaryLine(report, func(s string) string { return s }))
	return err
}

// printDiffMarkdown writes a heading, a warning when data is released, a
// table and the summary: a comment ready to post on a pull request.
func printDiffMarkdown(out io.Writer, report *diffReport) error {
	fmt.Fprintf(out, "### embedops diff `%s` → `%s`\n\n", short(report.From.Commit), short(report.To.Commit))
	if warning := retireWarning(report); warning != "" {
		fmt.Fprintf(out, "> [!WARNING]\n> %s\n\n", warning)
	}
	if len(report.Servers) > 0 {
		fmt.Fprintln(out, "| Server | Action | Binding | Model | Cache | Retain for | Download | Rolls |")
		fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, row := range diffRows(report, code) {
			fmt.Fprintf(out, "| %s |\n", strings.Join([]string{row.server, row.action, row.binding, row.model,
				cell(row.cache), cell(row.retainFor), cell(row.download), row.rolls}, " | "))
		}
		fmt.Fprintln(out)
	}
	for _, note := range conditions(report, code) {
		fmt.Fprintln(out, "- "+note)
	}
	_, err := fmt.Fprintln(out, summaryLine(report, code))
	return err
}

// revisionOf is the short commit, after the revision that named it unless
// that was the commit itself.
func revisionOf(rev diffRevision) string {
	if rev.Revision == rev.Commit {
		return short(rev.Commit)
	}
	return rev.Revision + " (" + short(rev.Commit) + ")"
}

// diffRows are the report's rows; names are passed through quote.
func diffRows(report *diffReport, quote func(string) string) []diffRow {
	var rows []diffRow
	for _, server := range report.Servers {
		rolls := "no"
		switch {
		case server.InPlace:
			rolls = "yes, in place (maxSurge 0)"
		case server.Rolls:
			rolls = "yes"
		}
		if len(server.Caches) == 0 {
			rows = append(rows, diffRow{server: quote(server.Server), action: "(no cache)", rolls: rolls})
		}
		for _, c := range server.Caches {
			rows = append(rows, diffRow{
				server:    quote(server.Server),
				action:    actionLabel(c.Action),
				binding:   quote(c.Binding),
				model:     quote(modelOf(c.Identity)),
				cache:     cacheOf(c.Decision),
				retainFor: retainForOf(c),
				download:  downloadOf(c),
				rolls:     rolls,
			})
		}
	}
	return rows
}

// conditions are the notes of successors the plan cannot be sure of, each
// ended by a blank line after the last; names are passed through quote.
func conditions(report *diffReport, quote func(string) string) []string {
	var notes []string
	for _, server := range report.Servers {
		for _, c := range server.Caches {
			if c.Condition != "" {
				notes = append(notes, fmt.Sprintf("%s: %s takes over the claims of %s %s.", quote(server.Server), quote(c.Binding), quote(c.Supersedes), c.Condition))
			}
		}
	}
	if len(notes) > 0 {
		notes[len(notes)-1] += "\n"
	}
	return notes
}

// actionLabel is an action with a plan tool's sign.
func actionLabel(action decision.Action) string {
	switch action {
	case decision.ActionCreate:
		return "+ create"
	case decision.ActionKeep:
		return "= keep"
	case decision.ActionKeepLifetimeChanged:
		return "~ keep (lifetime changed)"
	case decision.ActionKeepExpanded:
		return "~ keep (expanded in place)"
	case decision.ActionKeepRevised:
		return "~ keep (revised in place)"
	case decision.ActionRetire:
		return "- retire"
	default:
		return string(action)
	}
}

// modelOf is "model@revision", a full commit shortened.
func modelOf(identity embedopsv1.CacheIdentity) string {
	revision := identity.Revision
	if isFullCommit(revision) {
		revision = revision[:12]
	}
	return identity.Model + "@" + revision
}

// isFullCommit reports whether a model revision is a 40-hex commit.
func isFullCommit(revision string) bool {
	return len(revision) == 40 && strings.Trim(revision, "0123456789abcdef") == ""
}

// cacheOf is the mode, size and class of a decision; no class means the
// cluster's default. An existing claim is named instead.
func cacheOf(d embedopsv1.CacheDecision) string {
	if d.ExistingClaim != "" {
		return "existing claim " + d.ExistingClaim
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", d.Mode, d.Size.String(), d.StorageClassName))
}

// retainForOf is the decision's retainFor, "old -> new" when only it
// changed.
func retainForOf(c decision.CacheChange) string {
	now := shortDuration(c.Decision.RetainFor.Duration)
	if c.PreviousRetainFor == nil {
		return now
	}
	return shortDuration(c.PreviousRetainFor.Duration) + " -> " + now
}

// shortDuration drops a duration's zero minutes and seconds: 24h, 1h30m, 30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// downloadOf is what the change downloads for a cache: "-" for nothing,
// "unknown" when the model's size is not known.
func downloadOf(c decision.CacheChange) string {
	switch {
	case c.Download == nil || c.Download.Copies == 0:
		return "-"
	case c.Download.BytesPerCopy == nil:
		return "unknown"
	case c.Download.Copies == 1:
		return formatBytes(*c.Download.BytesPerCopy)
	default:
		return fmt.Sprintf("%s (%d x %s)", formatBytes(*c.Download.Bytes()), c.Download.Copies, formatBytes(*c.Download.BytesPerCopy))
	}
}

// formatBytes is a byte count in binary units with one decimal.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, exponent := float64(n)/unit, 0
	for value >= unit && exponent < 5 {
		value /= unit
		exponent++
	}
	return fmt.Sprintf("%.1f %ciB", value, "KMGTPE"[exponent])
}

// summaryLine counts the decisions, names the servers that roll and adds
// up the download; names are passed through quote.
func summaryLine(report *diffReport, quote func(string) string) string {
	s := report.Summary
	if len(report.Servers) == 0 {
		return "No cache decisions at either revision."
	}
	counts := []string{}
	for _, count := range []struct {
		n    int
		text string
	}{{s.Create, "to create"}, {s.Keep, "kept"}, {s.KeepLifetimeChanged, "kept with a new lifetime"},
		{s.KeepExpanded, "kept and expanded"}, {s.KeepRevised, "kept with a new revision"}, {s.Retire, "to retire"}} {
		if count.n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", count.n, count.text))
		}
	}
	rolls := "none"
	if len(s.Rolls) > 0 {
		names := make([]string, 0, len(s.Rolls))
		for _, name := range s.Rolls {
			names = append(names, quote(name))
		}
		rolls = strings.Join(names, ", ")
	}
	download := "unknown"
	if s.DownloadBytes != nil {
		download = formatBytes(*s.DownloadBytes)
	}
	return fmt.Sprintf("Plan: %s. Rolls: %s. Download: %s (sizes: %s).", strings.Join(counts, ", "), rolls, download, report.Sizes)
}

// retireWarning names the caches the change releases, "" when none.
func retireWarning(report *diffReport) string {
	var retired []string
	seen := map[string]bool{}
	for _, server := range report.Servers {
		for _, c := range server.Caches {
			if c.Action != decision.ActionRetire || seen[c.Binding] {
				continue
			}
			seen[c.Binding] = true
			retired = append(retired, fmt.Sprintf("%s (%s, last used by %s) is released %s after its last user leaves",
				code(c.Binding), cacheOf(c.Decision), code(server.Server), shortDuration(c.Decision.RetainFor.Duration)))
		}
	}
	if len(retired) == 0 {
		return ""
	}
	return "This change releases cached data: " + strings.Join(retired, "; ") + "."
}

// code is s as markdown inline code.
func code(s string) string { return "`" + s + "`" }

// cell escapes the pipes of a markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
