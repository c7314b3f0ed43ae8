package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
