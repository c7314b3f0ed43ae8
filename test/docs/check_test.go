package docs

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestCheck runs each form of span against the tree: what exists passes,
// a name the tree lacks is refused, also when its sentence names an
// upstream program, where the form is ours.
func TestCheck(t *testing.T) {
	r := repo(t)
	const prose = "the controller does this"
	const kubernetes = "as kubernetes v1.37.2 does"
	tests := []struct {
		name, span, sentence string
		refused              bool
	}{
		{name: "a package's function", span: "decision.For", sentence: prose},
		{name: "a package's missing function", span: "decision.NoSuchRule", sentence: prose, refused: true},
		{name: "a tree package's name is never upstream", span: "decision.NoSuchRule", sentence: kubernetes, refused: true},
		{name: "a type's method through its package", span: "act.ServerPatcher.AddFinalizer", sentence: prose},
		{name: "a type's missing method", span: "act.ServerPatcher.NoSuchMethod", sentence: prose, refused: true},
		{name: "an unexported function", span: "reconcileBinding", sentence: prose},
		{name: "a missing function", span: "reconcileNothing", sentence: prose, refused: true},
		{name: "a test", span: "TestOnlyTheActStepWrites", sentence: prose},
		{name: "a missing test", span: "TestNoSuchThing", sentence: kubernetes, refused: true},
		{name: "a command", span: "embedops diff --from A [--to B]", sentence: prose},
		{name: "a missing command", span: "embedops plan", sentence: prose, refused: true},
		{name: "a command's missing flag", span: "embedops diff --no-such-flag", sentence: prose, refused: true},
		{name: "the kubectl plugin", span: "kubectl embedops audit -A", sentence: prose},
		{name: "a make target", span: "make test-floor", sentence: prose},
		{name: "a missing make target", span: "make no-such-target", sentence: prose, refused: true},
		{name: "a go test of a package", span: "go test ./test/docs -run TestCheck", sentence: prose},
		{name: "a go test of a missing package", span: "go test ./test/nothing", sentence: prose, refused: true},
		{name: "a repository path", span: "internal/controller/doc.go", sentence: prose},
		{name: "a missing repository path", span: "internal/controller/nothing.go", sentence: kubernetes, refused: true},
		{name: "a path outside the repository", span: "../shared/DESIGN.md", sentence: prose, refused: true},
		{name: "a file name of the tree", span: "observe.go", sentence: prose},
		{name: "an upstream file in a sentence naming its program", span: "pkg/controller/statefulset/stateful_set.go", sentence: kubernetes},
		{name: "an upstream file in a sentence naming none", span: "pkg/controller/statefulset/stateful_set.go", sentence: prose, refused: true},
		{name: "a CRD field", span: "spec.cache.existingClaim", sentence: prose},
		{name: "a missing CRD field", span: "spec.cache.noSuchField", sentence: prose, refused: true},
		{name: "an object's metadata", span: "metadata.finalizers", sentence: prose},
		{name: "a field of a kind the controller writes", span: "spec.ordinals.start", sentence: prose},
		{name: "a field below a written kind's spec", span: "ordinals.start", sentence: prose},
		{name: "a field no written kind has", span: "spec.ordinals.end", sentence: prose, refused: true},
		{name: "a controller flag", span: "--watch-label-selector", sentence: prose},
		{name: "a missing flag", span: "--no-such-flag", sentence: prose, refused: true},
		{name: "a label", span: "embedops.dev/cache-binding", sentence: prose},
		{name: "a missing embedops label, even beside upstream", span: "embedops.dev/no-such-label", sentence: kubernetes, refused: true},
		{name: "a condition", span: "Ready=False Initializing", sentence: prose},
		{name: "a condition with a missing reason", span: "Ready=False NoSuchReason", sentence: prose, refused: true},
		{name: "a fluxcd reason api/ declares", span: "ProgressingWithRetry", sentence: prose},
		{name: "a chart value", span: "crds.enabled=false", sentence: prose},
		{name: "a naming scheme", span: "<template>-<statefulSet>-<ordinal>", sentence: prose},
		{name: "a repository path pattern", span: "test/tools/<set>", sentence: prose},
		{name: "a repository path pattern matching nothing", span: "test/nothing/<set>", sentence: prose, refused: true},
		{name: "a phrase of unknown form", span: "a ~ b", sentence: prose, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			problem := r.Check(Span{Line: 1, Text: tt.span, Sentence: tt.sentence})
			if tt.refused {
				g.Expect(problem).NotTo(BeEmpty(), "%s passed", tt.span)
			} else {
				g.Expect(problem).To(BeEmpty())
			}
		})
	}
}

// TestCheckOwnNamesLeavesProseAlone checks that the user docs' check
// refuses a wrong name of the tree's code and leaves other forms alone.
func TestCheckOwnNamesLeavesProseAlone(t *testing.T) {
	g := NewWithT(t)
	r := repo(t)
	own := func(text string) string {
		return r.CheckOwnNames(Span{Line: 1, Text: text, Sentence: "users read this"})
	}
	g.Expect(own("embedops plan")).NotTo(BeEmpty())
	g.Expect(own("internal/nothing")).NotTo(BeEmpty())
	g.Expect(own("decision.NoSuchRule")).NotTo(BeEmpty())
	g.Expect(own("TestNoSuchThing")).NotTo(BeEmpty())
	g.Expect(own("claim C is deleted once pod P is gone")).To(BeEmpty())
	g.Expect(own("--take-ownership")).To(BeEmpty())
}

// TestSpans reads code spans with their lines, across a line break, and
// not inside fenced code blocks; a table cell is its own sentence.
func TestSpans(t *testing.T) {
	g := NewWithT(t)
	markdown := "# Title\n\nRun `embedops\naudit` now. Then `b`.\n\n```sh\nnot `code`\n```\n\n| a | `c` in a cell | d |\n"
	spans := Spans(markdown)
	g.Expect(spans).To(HaveLen(3))
	g.Expect(spans[0]).To(Equal(Span{Line: 3, Text: "embedops audit", Sentence: "Run `embedops audit` now", End: 29}))
	g.Expect(spans[1].Line).To(Equal(4))
	g.Expect(spans[1].Sentence).To(Equal("Then `b`"))
	g.Expect(spans[2].Line).To(Equal(10))
	g.Expect(spans[2].Sentence).To(Equal(" `c` in a cell "))
}
