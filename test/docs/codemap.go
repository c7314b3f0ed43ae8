package docs

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Section returns a Markdown section: from its heading line to the next
// heading of the same or a higher level, or "" when there is none.
func Section(markdown, heading string) string {
	start := strings.Index(markdown, "\n"+heading+"\n")
	if start < 0 {
		return ""
	}
	level := strings.Index(heading, " ")
	rest := markdown[start+1+len(heading):]
	for i := 0; i < len(rest); {
		next := strings.Index(rest[i:], "\n#")
		if next < 0 {
			break
		}
		i += next + 1
		hashes := len(rest[i:]) - len(strings.TrimLeft(rest[i:], "#"))
		if hashes <= level {
			return markdown[start+1 : start+1+len(heading)+i]
		}
	}
	return markdown[start+1:]
}

// TableRows returns the cells of a section's table rows, header and
// separator rows left out.
func TableRows(section string) [][]string {
	var rows [][]string
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) > 0 {
		rows = rows[1:]
	}
	return rows
}

// GoLines counts the lines of the non-test .go files match accepts, as
// `wc -l` does.
func (r *Repo) GoLines(match func(file string) bool) (int, error) {
	lines := 0
	for file := range r.files {
		if !strings.HasSuffix(file, ".go") || strings.HasSuffix(file, "_test.go") || !match(file) {
			continue
		}
		data, err := os.ReadFile(path.Join(r.root, file))
		if err != nil {
			return 0, fmt.Errorf("count %s: %w", file, err)
		}
		lines += bytes.Count(data, []byte("\n"))
	}
	return lines, nil
}

// InDirs matches the files directly in one of dirs.
func InDirs(dirs ...string) func(string) bool {
	return func(file string) bool {
		for _, dir := range dirs {
			if path.Dir(file) == dir {
				return true
			}
		}
		return false
	}
}

// Production matches the files outside test/.
func Production(file string) bool { return !strings.HasPrefix(file, "test/") }

// kiloLines reads a figure such as 4.8k.
var kiloLines = regexp.MustCompile(`^(\d+(?:\.\d+)?)k`)

// percent reads a share such as (18 %.
var percent = regexp.MustCompile(`\((\d+) %`)

// StatedLines reads the lines a figure cell states, and the share when it
// states one (-1 when not).
func StatedLines(cell string) (lines, share int, err error) {
	m := kiloLines.FindStringSubmatch(cell)
	if m == nil {
		return 0, 0, fmt.Errorf("%q states no lines", cell)
	}
	k, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, 0, fmt.Errorf("read %q: %w", cell, err)
	}
	share = -1
	if p := percent.FindStringSubmatch(cell); p != nil {
		share, _ = strconv.Atoi(p[1])
	}
	return int(k * 1000), share, nil
}

// Near tells whether a stated figure is the actual one, give or take a
// tenth or 100 lines: the figures are rounded, and a package may grow a
// little before the map is redone.
func Near(stated, actual int) bool {
	diff := stated - actual
	if diff < 0 {
		diff = -diff
	}
	return diff <= max(100, actual/10)
}

// FuncFile returns the file of the tree that declares a function or method
// of the package in dir, or "".
func (r *Repo) FuncFile(dir, name string) string {
	return r.goIndex.funcFiles[dir+"."+name]
}
