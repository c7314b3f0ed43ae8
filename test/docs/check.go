package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// Check returns why a code span names nothing in the tree, or "" when what
// it names exists. Each form of span has its rule, tried in this order; a
// span of no known form is refused, so a new form needs a rule here.
func (r *Repo) Check(s Span) string {
	text := s.Text
	words := strings.Fields(text)
	switch {
	case len(words) > 1 && words[0] == "kubectl" && words[1] == "embedops":
		return r.command(words[2:])
	case len(words) > 1 && externalPrograms[words[0]]:
		// Another program's command line is that program's.
		return ""
	case len(words) > 1 && words[0] == "embedops":
		return r.command(words[1:])
	case len(words) > 1 && words[0] == "make":
		return r.make(words[1:])
	case len(words) > 1 && words[0] == "go":
		return r.goCommand(words[1:])
	case strings.Contains(text, "<"):
		return r.pattern(text)
	case number.MatchString(text):
		// A value: -1, a suffix -2.
		return ""
	case r.goIndex.literals[text]:
		// A string the code uses as it is: a flag's default, a name.
		return ""
	case marker.MatchString(text):
		return r.marker(text)
	case flag.MatchString(text):
		return r.flag(text)
	case domainKey.MatchString(text):
		return r.domainKey(text, s)
	case expression.MatchString(text):
		return r.expression(text, s)
	case pathLike.MatchString(text):
		return r.path(text, s)
	case qualified.MatchString(text):
		return r.qualified(text, s)
	case word.MatchString(text):
		return r.word(text, s)
	}
	return fmt.Sprintf("%q has no form this check knows", text)
}

var (
	// externalPrograms are commands whose command lines belong to others.
	externalPrograms = set{"kubectl": true, "helm": true, "git": true, "wc": true, "kustomize": true, "curl": true}
	// marker is a kubebuilder marker.
	marker = regexp.MustCompile(`^\+?kubebuilder:`)
	// flag is a command-line flag, perhaps with its value: --force, -f,
	// --prune=false.
	flag = regexp.MustCompile(`^--?[A-Za-z][\w-]*(=\S*)?$`)
	// domainKey is a key under a DNS name: a label, annotation or
	// finalizer, an API group version, a Go import path. A leading ! is a
	// label selector's negation.
	domainKey = regexp.MustCompile(`^!?[a-z0-9-]+(\.[a-z0-9-]+)+/\S*$`)
	// expression holds operators or several words: conditions
	// (Ready=False Initializing), sums, YAML pairs, call arguments.
	expression = regexp.MustCompile(`\s|[=+×{},()]|: |->`)
	// pathLike is a file or directory path, a file name with an extension
	// or a URL path.
	pathLike = regexp.MustCompile(`/|^\.?[\w.-]*\.(go|md|yaml|yml|json|lua|rs|py|sh|tpl|mod)$`)
	// qualified is a dotted Go name (pkg.Ident, Type.Method) or a field
	// path (spec.cache.mode).
	qualified = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$`)
	// word is one name, perhaps hyphenated, ending in a wildcard, or a
	// $reference.
	word = regexp.MustCompile(`^\$?[A-Za-z_][\w-]*\*?$`)
	// number is a numeric value.
	number = regexp.MustCompile(`^-?\d+(\.\d+)?%?$`)
)

// values are words a span may hold that name nothing: condition statuses
// and booleans.
var values = set{"True": true, "False": true, "Unknown": true, "true": true, "false": true}

// expression checks each operand of an expression or each word of a phrase.
func (r *Repo) expression(text string, s Span) string {
	if call := callExpr.FindStringSubmatch(text); call != nil {
		// A call names its function; its arguments are placeholders.
		return r.Check(Span{Line: s.Line, Text: call[1], Sentence: s.Sentence})
	}
	var problems []string
	for _, operand := range operands.Split(text, -1) {
		if operand == "" || values[operand] || number.MatchString(operand) || operand == "..." {
			continue
		}
		if problem := r.Check(Span{Line: s.Line, Text: operand, Sentence: s.Sentence}); problem != "" {
			problems = append(problems, problem)
		}
	}
	return strings.Join(problems, "; ")
}

var (
	// callExpr is a call with its arguments: Ledger.Leave(server, keep).
	callExpr = regexp.MustCompile(`^([\w.]+)\(.*\)$`)
	// operands splits an expression at its operators and spaces.
	operands = regexp.MustCompile(`(?:[\s=+×{},()!]|->)+|:\s+|^:|:$`)
)

// CheckOwnNames is Check for the spans that name the tree's own code only:
// an embedops, make or go command line, a path under a top-level entry of
// the tree, a test, or a Go name qualified by a library package of the
// tree. Other
// spans are left alone: documents written for users quote messages,
// placeholders and other programs' settings in forms Check refuses.
func (r *Repo) CheckOwnNames(s Span) string {
	words := strings.Fields(s.Text)
	first, _, _ := strings.Cut(strings.TrimPrefix(s.Text, "./"), "/")
	qualifier, _, _ := strings.Cut(s.Text, ".")
	switch {
	case len(words) > 1 && (words[0] == "embedops" || words[0] == "make" || words[0] == "go" ||
		(words[0] == "kubectl" && words[1] == "embedops")):
	case len(words) == 1 && strings.Contains(s.Text, "/") && r.topLevel[first]:
	case isTestFunc(s.Text) && word.MatchString(s.Text):
	case qualified.MatchString(s.Text) && r.goIndex.ownPackages[qualifier]:
	default:
		return ""
	}
	return r.Check(s)
}
