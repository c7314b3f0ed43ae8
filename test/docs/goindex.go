package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"reflect"
	"strconv"
	"strings"
)

// goIndex is what the repository's Go source declares and uses, read with
// go/parser from every .go file of the tree.
type goIndex struct {
	// packages maps a package name to the names it declares: top-level
	// identifiers and the methods and fields of its types.
	packages map[string]set
	// members maps a type name to its methods and fields, whatever its
	// package.
	members map[string]set
	// names holds every declared name above, and the functions'
	// parameters.
	names set
	// selectors holds "x.Name" for each selector the code writes, the
	// last two names of a chain (r.rollouts.seen gives "rollouts.seen").
	selectors set
	// used holds the names the code selects (x.Name gives Name): its own
	// and its libraries' functions, methods and fields.
	used set
	// ownPackages holds the names of the tree's library packages: those
	// outside test/, and those of test/ that other packages import
	// (harness), not test suites such as test/upgrade.
	ownPackages set
	// funcFiles maps "dir.Name" to the file that declares the function or
	// method Name of the package in dir.
	funcFiles map[string]string
	// values maps a constant's or variable's name to the values of its
	// declarations that evaluate: integers and durations.
	values map[string][]int64
	// imports holds every import path.
	imports set
	// aliases maps an import's local name to the package names it stands
	// for (embedopsv1 -> v1alpha1).
	aliases map[string]set
	// tests holds the Test, Fuzz, Benchmark and Example functions of
	// _test.go files.
	tests set
	// literals holds the value of every string literal outside _test.go
	// files; testLiterals those of _test.go files, which define test flags
	// (-update) but also hold made-up names.
	literals, testLiterals set
	// jsonNames holds the names of struct tags' json keys.
	jsonNames set
	// source is the raw text of every Go file, comments included, for
	// markers such as +kubebuilder:rbac.
	source strings.Builder
}

// set is a set of strings.
type set map[string]bool

// addTo adds value to the set held under key, making it when missing.
func addTo(m map[string]set, key, value string) {
	if m[key] == nil {
		m[key] = set{}
	}
	m[key][value] = true
}

// newGoIndex parses the given .go files, paths relative to root.
func newGoIndex(root string, files []string) (*goIndex, error) {
	idx := &goIndex{
		packages: map[string]set{}, members: map[string]set{}, names: set{},
		selectors: set{}, used: set{}, imports: set{}, aliases: map[string]set{},
		tests: set{}, literals: set{}, testLiterals: set{}, jsonNames: set{}, ownPackages: set{},
		funcFiles: map[string]string{}, values: map[string][]int64{},
	}
	dirs := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		src, err := os.ReadFile(path.Join(root, file))
		if err != nil {
			return nil, err
		}
		idx.source.Write(src)
		// A file another change left half-written still declares what
		// parsed: the partial AST is read, the error ignored.
		parsed, _ := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
		if parsed == nil {
			continue
		}
		isTest := strings.HasSuffix(file, "_test.go")
		idx.addFile(parsed, isTest, path.Dir(file) == ownDir)
		for _, decl := range parsed.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && !isTest {
				idx.funcFiles[path.Dir(file)+"."+fn.Name.Name] = file
			}
		}
		if !isTest {
			dirs[path.Dir(file)] = parsed.Name.Name
		}
	}
	for dir, pkg := range dirs {
		if !strings.HasPrefix(dir, "test/") || idx.importedDir(dir) {
			idx.ownPackages[pkg] = true
		}
	}
	return idx, nil
}

// importedDir tells whether some file imports the package in dir.
func (idx *goIndex) importedDir(dir string) bool {
	for imp := range idx.imports {
		if strings.HasSuffix(imp, "/"+dir) {
			return true
		}
	}
	return false
}

// addFile indexes one parsed file; the literals of ownFile are left out.
func (idx *goIndex) addFile(f *ast.File, isTest, ownFile bool) {
	pkg := f.Name.Name
	idx.declare(pkg, pkg)
	for _, imp := range f.Imports {
		importPath, _ := strconv.Unquote(imp.Path.Value)
		idx.imports[importPath] = true
		if imp.Name != nil {
			addTo(idx.aliases, imp.Name.Name, path.Base(importPath))
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			idx.addFunc(pkg, d, isTest)
		case *ast.GenDecl:
			idx.addGenDecl(pkg, d)
		}
	}
	literals := idx.literals
	switch {
	case ownFile:
		literals = set{}
	case isTest:
		literals = idx.testLiterals
	}
	ast.Inspect(f, func(n ast.Node) bool { return idx.addUse(n, literals) })
}

// declare records name as declared by package pkg.
func (idx *goIndex) declare(pkg, name string) {
	addTo(idx.packages, pkg, name)
	idx.names[name] = true
}

// addFunc records a function, or a method as a member of its receiver's
// type, and its parameters' names.
func (idx *goIndex) addFunc(pkg string, d *ast.FuncDecl, isTest bool) {
	idx.declare(pkg, d.Name.Name)
	for _, param := range d.Type.Params.List {
		for _, name := range param.Names {
			idx.names[name.Name] = true
		}
	}
	if d.Recv == nil {
		if isTest && isTestFunc(d.Name.Name) {
			idx.tests[d.Name.Name] = true
		}
		return
	}
	if receiver := receiverType(d.Recv.List[0].Type); receiver != "" {
		addTo(idx.members, receiver, d.Name.Name)
	}
}

// isTestFunc tells whether go test runs a function of that name.
func isTestFunc(name string) bool {
	for _, prefix := range []string{"Test", "Fuzz", "Benchmark", "Example"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// receiverType is the name of a method receiver's type: T, *T, T[P].
func receiverType(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// addGenDecl records types with their fields and interface methods,
// constants and variables with the values that evaluate.
func (idx *goIndex) addGenDecl(pkg string, d *ast.GenDecl) {
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			idx.declare(pkg, s.Name.Name)
			idx.addTypeMembers(pkg, s.Name.Name, s.Type)
		case *ast.ValueSpec:
			for i, name := range s.Names {
				idx.declare(pkg, name.Name)
				if i < len(s.Values) {
					if value, ok := evaluate(s.Values[i]); ok {
						idx.values[name.Name] = append(idx.values[name.Name], value)
					}
				}
			}
		}
	}
}

// addTypeMembers records the fields of a struct type and the methods of an
// interface type as members of typeName and names of pkg.
func (idx *goIndex) addTypeMembers(pkg, typeName string, expr ast.Expr) {
	var fields *ast.FieldList
	switch t := expr.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, field := range fields.List {
		idx.addTag(field.Tag)
		for _, name := range field.Names {
			addTo(idx.members, typeName, name.Name)
			idx.declare(pkg, name.Name)
		}
		if len(field.Names) == 0 {
			if embedded := receiverType(field.Type); embedded != "" {
				addTo(idx.members, typeName, embedded)
			}
		}
	}
}

// addTag records the json key of a struct tag.
func (idx *goIndex) addTag(tag *ast.BasicLit) {
	if tag == nil {
		return
	}
	value, err := strconv.Unquote(tag.Value)
	if err != nil {
		return
	}
	if name, _, _ := strings.Cut(reflect.StructTag(value).Get("json"), ","); name != "" && name != "-" {
		idx.jsonNames[name] = true
	}
}

// addUse records the selectors of a file, and its string literals in
// literals.
func (idx *goIndex) addUse(n ast.Node, literals set) bool {
	switch e := n.(type) {
	case *ast.SelectorExpr:
		idx.used[e.Sel.Name] = true
		if x := lastName(e.X); x != "" {
			idx.selectors[x+"."+e.Sel.Name] = true
		}
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			if value, err := strconv.Unquote(e.Value); err == nil {
				literals[value] = true
			}
		}
	}
	return true
}

// lastName is the last name of a selector chain's left side: x in x.Sel,
// b in a.b.Sel, f in f().Sel.
func lastName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.CallExpr:
		return lastName(e.Fun)
	}
	return ""
}
