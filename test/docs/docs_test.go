package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository root, seen from this package.
const repoRoot = "../.."

// designDoc is written from the code: every code span of it must name
// what exists.
const designDoc = "docs/design.md"

// userDocs are written for users: the spans that name the tree's own code
// must name what exists (Repo.CheckOwnNames).
var userDocs = []string{"README.md", "docs/api.md", "docs/benchmarks.md", "docs/cli.md", "docs/operations.md", "docs/testing.md"}

var (
	loadOnce sync.Once
	loaded   *Repo
	loadErr  error
)

// repo reads the working tree once for all tests.
func repo(t *testing.T) *Repo {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = LoadRepo(repoRoot) })
	if loadErr != nil {
		t.Fatalf("read the tree: %v", loadErr)
	}
	return loaded
}

// TestDocsNameWhatExists fails on every code span of docs/design.md that
// names a file, function, type, test, command, flag, make target or field
// the tree lacks, and on every span of the user docs that names the
// tree's own code wrongly, listing each with its line.
func TestDocsNameWhatExists(t *testing.T) {
	r := repo(t)
	docs := map[string]func(Span) string{designDoc: r.Check}
	for _, doc := range userDocs {
		docs[doc] = r.CheckOwnNames
	}
	for doc, check := range docs {
		t.Run(doc, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(repoRoot, doc))
			if err != nil {
				t.Fatal(err)
			}
			if missing := missingNames(doc, string(data), check); len(missing) > 0 {
				t.Errorf("%s names %d things the tree lacks:\n%s", doc, len(missing), strings.Join(missing, "\n"))
			}
		})
	}
}

// missingNames lists, one per line, the spans of a document that check
// refuses, with their line numbers.
func missingNames(doc, markdown string, check func(Span) string) []string {
	var missing []string
	for _, span := range Spans(markdown) {
		if problem := check(span); problem != "" {
			missing = append(missing, fmt.Sprintf("%s:%d: `%s`: %s", doc, span.Line, span.Text, problem))
		}
	}
	return missing
}
