package docs

import (
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pattern checks a name with placeholders (<server>-pods, test/tools/<set>):
// a repository path's placeholders must match something; any other pattern
// is a naming scheme, prose.
func (r *Repo) pattern(text string) string {
	first, _, found := strings.Cut(strings.TrimPrefix(text, "./"), "/")
	if !found || !r.topLevel[first] || generatedDirs[first] {
		return ""
	}
	glob := placeholder.ReplaceAllString(text, "*")
	if matches, _ := filepath.Glob(filepath.Join(r.root, glob)); len(matches) == 0 {
		return fmt.Sprintf("nothing in the tree matches %s", text)
	}
	return ""
}

// placeholder is a <placeholder> of a pattern.
var placeholder = regexp.MustCompile(`<[^>]*>`)

// marker checks that a kubebuilder marker is written in the Go source.
func (r *Repo) marker(text string) string {
	if !strings.Contains(r.goIndex.source.String(), "+"+strings.TrimPrefix(text, "+")) {
		return fmt.Sprintf("no Go file carries the marker %s", text)
	}
	return ""
}

// flag checks that the code defines a flag of that name: flags are defined
// with their name as a string literal (flag, pflag, cobra).
func (r *Repo) flag(text string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(text, "-"), "=")
	if !r.goIndex.literals[name] && !r.goIndex.testLiterals[name] {
		return fmt.Sprintf("no flag %s is defined in the Go source", text)
	}
	return ""
}

// domainKey checks a key under a DNS name. An import path (or the module
// it belongs to) must be imported; a label, annotation or API group must be
// a string the code or configuration uses, except a key of another
// project's domain named in a sentence about that project. a|b names
// keys that differ in their last segment.
func (r *Repo) domainKey(text string, s Span) string {
	text = strings.TrimPrefix(text, "!")
	prefix := text[:strings.LastIndex(text, "/")+1]
	for i, key := range strings.Split(text, "|") {
		if i > 0 {
			key = prefix + key
		}
		if r.imported(key) || r.used(key) {
			continue
		}
		if !strings.HasPrefix(key, "embedops.dev/") && upstream(s.Sentence) {
			continue
		}
		return fmt.Sprintf("no code, import or configuration uses %s", key)
	}
	return ""
}

// imported tells whether an import path is the path, a suffix (fluxcd/pkg/ssa)
// or a prefix (helm.sh/helm/v3) of one the code imports.
func (r *Repo) imported(p string) bool {
	for imp := range r.goIndex.imports {
		if imp == p || strings.HasSuffix(imp, "/"+p) || strings.HasPrefix(imp, p+"/") {
			return true
		}
	}
	return false
}

// used tells whether a string is a string literal of the code, or the prefix
// of one when it ends in *, or appears in the configuration.
func (r *Repo) used(text string) bool {
	if prefix, ok := strings.CutSuffix(text, "*"); ok {
		for literal := range r.goIndex.literals {
			if strings.HasPrefix(literal, prefix) {
				return true
			}
		}
		return strings.Contains(r.configText, prefix)
	}
	return r.goIndex.literals[text] || strings.Contains(r.configText, text)
}

// path checks a path. One under a top-level entry of the tree must exist,
// one that leaves the tree is refused; a shorter one (ledger/doc.go,
// observe.go) must end some path of the tree; else it must be a path the
// code uses (a URL) or joins from strings it uses (a cache layout), or an
// upstream program's file named in a sentence about that program.
func (r *Repo) path(text string, s Span) string {
	// dir/... is a Go package pattern: the directory and those below.
	p := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(text, "./"), "..."), "/")
	first, _, _ := strings.Cut(p, "/")
	switch {
	case first == "..":
		return fmt.Sprintf("%s is outside the repository", text)
	case r.topLevel[first]:
		if generatedDirs[first] || r.files[p] {
			return ""
		}
		return fmt.Sprintf("no %s in the tree", text)
	case r.endsAPath(p), r.imported(p), r.usedInside(p), r.builtFromLiterals(p), upstream(s.Sentence):
		return ""
	}
	return fmt.Sprintf("no path of the tree ends in %s", text)
}

// endsAPath tells whether some path of the tree ends with p (a file
// extension such as .go included).
func (r *Repo) endsAPath(p string) bool {
	for file := range r.files {
		if strings.HasSuffix("/"+file, "/"+p) || (strings.HasPrefix(p, ".") && strings.HasSuffix(file, p)) {
			return true
		}
	}
	return false
}

// usedInside tells whether a string literal of the code or the
// configuration holds text.
func (r *Repo) usedInside(text string) bool {
	for literal := range r.goIndex.literals {
		if strings.Contains(literal, text) {
			return true
		}
	}
	return strings.Contains(r.configText, text)
}

// fieldRoots start a field path of an object.
var fieldRoots = map[string]bool{"spec": true, "status": true, "metadata": true}

// qualified checks a dotted name. A field path must be a field of one of
// the CRDs (metadata: of ObjectMeta) or of a kind the controller writes; a
// Go name must be declared (pkg.Ident, pkg.Type.Member, Type.Member) or
// written as a selector in the code; a values path must be in the chart's
// values; a path below a written kind's spec (ordinals.start) is one. A name none of these hold is
// accepted only as an upstream program's, in a sentence about it, and
// never when it starts with a library package of the tree.
func (r *Repo) qualified(text string, s Span) string {
	parts := strings.Split(text, ".")
	if fieldRoots[parts[0]] {
		if r.field(parts) || upstream(s.Sentence) {
			return ""
		}
		return fmt.Sprintf("no CRD of config/crd/bases and no kind the controller writes has the field %s", text)
	}
	if r.goName(parts) || hasPath(r.values, parts) || kindField(append([]string{"spec"}, parts...)) {
		return ""
	}
	if !r.goIndex.ownPackages[parts[0]] && upstream(s.Sentence) {
		return ""
	}
	return fmt.Sprintf("%s is declared nowhere in the Go source", text)
}

// goName tells whether a dotted Go name is declared or used as written.
func (r *Repo) goName(parts []string) bool {
	g := r.goIndex
	packages := []string{parts[0]}
	for alias := range g.aliases[parts[0]] {
		packages = append(packages, alias)
	}
	switch len(parts) {
	case 2:
		for _, pkg := range packages {
			if g.packages[pkg][parts[1]] {
				return true
			}
		}
		return g.members[parts[0]][parts[1]] || g.selectors[parts[0]+"."+parts[1]]
	case 3:
		for _, pkg := range packages {
			if g.packages[pkg][parts[1]] && g.members[parts[1]][parts[2]] {
				return true
			}
		}
	}
	return false
}

// field tells whether a field path is in a CRD's schema or a written
// kind's.
func (r *Repo) field(parts []string) bool {
	if parts[0] == "metadata" {
		return len(parts) == 2 && objectMetaFields()[parts[1]]
	}
	for _, schema := range r.crds {
		if schemaHas(schema, parts) {
			return true
		}
	}
	return kindField(parts)
}

// schemaHas walks an OpenAPI schema along a field path; a field that
// preserves unknown fields holds any path below it.
func schemaHas(schema map[string]any, parts []string) bool {
	for _, part := range parts {
		for schema["type"] == "array" {
			items, _ := schema["items"].(map[string]any)
			schema = items
		}
		if schema["x-kubernetes-preserve-unknown-fields"] == true && schema["properties"] == nil {
			return true
		}
		properties, _ := schema["properties"].(map[string]any)
		next, ok := properties[part].(map[string]any)
		if !ok {
			return false
		}
		schema = next
	}
	return true
}

// objectMetaFields are the json keys of ObjectMeta, which the CRDs' schemas
// leave to the API server.
func objectMetaFields() set {
	fields := set{}
	t := reflect.TypeFor[metav1.ObjectMeta]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	return fields
}

// hasPath tells whether a YAML document holds a key path.
func hasPath(doc map[string]any, parts []string) bool {
	for i, part := range parts {
		value, ok := doc[part]
		if !ok {
			return false
		}
		if i == len(parts)-1 {
			return true
		}
		if doc, ok = value.(map[string]any); !ok {
			return false
		}
	}
	return false
}

// word checks one name. A test must be a test function of the tree (a
// trailing * matches a prefix). Any other name must be declared in the Go
// source (a function, type, constant, variable, method, field, parameter
// or package) or selected by it (a library's method), be a json key of a
// struct, a string literal (a flag, a label value), a word of the
// configuration, a condition type or reason of api/ (its value may be
// fluxcd's), an imported package, one of upstreamValues, or an upstream
// program's name in a sentence about that program.
func (r *Repo) word(text string, s Span) string {
	g := r.goIndex
	prefix, wildcard := strings.CutSuffix(text, "*")
	if isTestFunc(text) {
		if g.tests[text] || (wildcard && anyHasPrefix(g.tests, prefix)) {
			return ""
		}
		return fmt.Sprintf("no test %s in the tree", text)
	}
	if wildcard {
		if anyHasPrefix(g.names, prefix) || anyHasPrefix(g.literals, prefix) || anyHasPrefix(r.configWords, prefix) || upstream(s.Sentence) {
			return ""
		}
		return fmt.Sprintf("no name of the tree starts with %s", prefix)
	}
	if g.names[text] || g.used[text] || g.jsonNames[text] || g.literals[text] || r.configWords[text] ||
		r.vocabulary(text) || r.importedPackage(text) || upstreamValues[text] || upstream(s.Sentence) {
		return ""
	}
	return fmt.Sprintf("%s is declared nowhere in the Go source and is no json key, string or configuration word", text)
}

// anyHasPrefix tells whether some member of names starts with prefix.
func anyHasPrefix(names set, prefix string) bool {
	for name := range names {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// vocabulary tells whether api/v1alpha1 declares name as a condition type
// or reason (ReadyCondition, ProgressingWithRetryReason), whose value may
// be fluxcd's constant of the same name.
func (r *Repo) vocabulary(name string) bool {
	api := r.goIndex.packages["v1alpha1"]
	return api[name+"Condition"] || api[name+"Reason"]
}

// importedPackage tells whether the code imports a package of that name
// (gittestserver).
func (r *Repo) importedPackage(name string) bool {
	for imp := range r.goIndex.imports {
		if path.Base(imp) == name {
			return true
		}
	}
	return false
}

// builtFromLiterals tells whether each segment of a path is a string the
// code uses, as a path it joins from its parts (.embedops/latest).
func (r *Repo) builtFromLiterals(p string) bool {
	for segment := range strings.SplitSeq(p, "/") {
		if !r.goIndex.literals[segment] {
			return false
		}
	}
	return true
}
