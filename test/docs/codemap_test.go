package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// designText reads docs/design.md.
func designText(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, designDoc))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// codeSpanText is a code span's content.
var codeSpanText = regexp.MustCompile("`([^`]+)`")

// totalLines reads the code map's total of production lines.
var totalLines = regexp.MustCompile("Production Go lines outside `test/`: (\\d+(?:\\.\\d+)?k)")

// TestCodeMapFigures compares each figure of the code map (§10) with the
// tree: the production lines, and each package's lines and share, within
// Near.
func TestCodeMapFigures(t *testing.T) {
	g := NewWithT(t)
	r := repo(t)
	section := Section(designText(t), "## 10. Code map")
	g.Expect(section).NotTo(BeEmpty(), "design.md has no section 10. Code map")

	total, err := r.GoLines(Production)
	g.Expect(err).NotTo(HaveOccurred())
	stated := totalLines.FindStringSubmatch(section)
	g.Expect(stated).NotTo(BeNil(), "the code map states no production lines")
	statedTotal, _, err := StatedLines(stated[1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Near(statedTotal, total)).To(BeTrue(), "the code map states %s production lines; the tree has %d", stated[1], total)

	rows := TableRows(section)
	g.Expect(rows).NotTo(BeEmpty())
	for _, row := range rows {
		var dirs []string
		for _, m := range codeSpanText.FindAllStringSubmatch(row[0], -1) {
			dirs = append(dirs, m[1])
		}
		t.Run(strings.Join(dirs, ","), func(t *testing.T) {
			g := NewWithT(t)
			lines, err := r.GoLines(InDirs(dirs...))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lines).To(BeNumerically(">", 0), "no Go file in %v", dirs)
			statedLines, share, err := StatedLines(row[len(row)-1])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(Near(statedLines, lines)).To(BeTrue(), "%v: the code map states %s; the tree has %d lines", dirs, row[len(row)-1], lines)
			if share >= 0 {
				g.Expect(float64(share)).To(BeNumerically("~", 100*float64(lines)/float64(total), 2), "%v: the share of %d of %d lines", dirs, lines, total)
			}
		})
	}
}

// TestCodeMapNamesEveryPhaseFile checks that the code map's row of
// internal/controller names each file that declares a function of §2's
// phase table, so a phase moved to a file of its own shows up there.
func TestCodeMapNamesEveryPhaseFile(t *testing.T) {
	g := NewWithT(t)
	r := repo(t)
	text := designText(t)
	phases := TableRows(Section(text, "### Phases"))
	g.Expect(phases).NotTo(BeEmpty(), "design.md has no phase table")
	var controllerRow string
	for _, row := range TableRows(Section(text, "## 10. Code map")) {
		if row[0] == "`internal/controller`" {
			controllerRow = strings.Join(row, " | ")
		}
	}
	g.Expect(controllerRow).NotTo(BeEmpty(), "the code map has no row for internal/controller")
	for _, row := range phases {
		g.Expect(len(row)).To(BeNumerically(">=", 3), "phase row %v", row)
		function := codeSpanText.FindStringSubmatch(row[2])
		g.Expect(function).NotTo(BeNil(), "phase row %v names no function", row)
		file := r.FuncFile("internal/controller", function[1])
		g.Expect(file).NotTo(BeEmpty(), "internal/controller declares no %s", function[1])
		g.Expect(controllerRow).To(ContainSubstring("`"+path.Base(file)+"`"), "the code map's internal/controller row does not name %s, where %s lives", path.Base(file), function[1])
	}
}

// TestDesignStatesValuesAsDeclared compares each value design.md states in
// parentheses right after a name of the code (`CreatorGrace` (30 s),
// `decision.MaxBindingSuffix` (100)) with the value the code declares for
// it, or for its option's Default<name> constant.
func TestDesignStatesValuesAsDeclared(t *testing.T) {
	r := repo(t)
	text := designText(t)
	checked := 0
	for _, span := range Spans(text) {
		stated, ok := StatedValue(strings.TrimLeft(text[span.End:], " "))
		declared := r.DeclaredValues(span.Text)
		if !ok || len(declared) == 0 {
			continue
		}
		checked++
		if !slices.Contains(declared, stated) {
			t.Errorf("%s:%d: `%s` is stated as %s; the code declares %s", designDoc, span.Line, span.Text,
				statedText(text[span.End:]), declaredText(declared, strings.ContainsAny(statedText(text[span.End:]), "smh")))
		}
	}
	if checked == 0 {
		t.Errorf("%s states no value of a declared name: the check reads nothing", designDoc)
	}
}

// statedText is the parenthesised value after a span, for a message.
func statedText(after string) string {
	after = strings.TrimLeft(after, " ")
	if end := strings.Index(after, ")"); end >= 0 {
		return after[:end+1]
	}
	return after
}

// declaredText formats declared values, as durations when the stated one
// is.
func declaredText(declared []int64, durations bool) string {
	var texts []string
	for _, value := range declared {
		if durations {
			texts = append(texts, time.Duration(value).String())
		} else {
			texts = append(texts, strconv.FormatInt(value, 10))
		}
	}
	return strings.Join(texts, " or ")
}
