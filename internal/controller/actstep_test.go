package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeCalls are the methods that write to the API server, by the field
// of the reconciler or scope they are called on. Dry runs (act's
// DryRunCreate and DryRunApply) write nothing and are not among them.
var writeCalls = map[string][]string{
	"act":     {"CreateChild", "ApplyChildren", "CreateJob", "DeleteJob", "MergePatch", "Delete"},
	"ledger":  {"Bind", "Leave", "ExpandClaims", "RecordRealized", "ReportPopulate"},
	"patcher": {"AddFinalizer", "Patch"},
}

// A server reconcile reads and plans, then writes in the act step
// (carryOut), round by round, then reports: no phase reaches a write but
// the act step, which reaches every kind of write a reconcile makes before
// its status patch. The phases are read from observePlanActReport, the
// calls from the package's source.
func TestOnlyTheActStepWrites(t *testing.T) {
	t.Parallel()
	funcs := parsePackageFuncs(t)
	before, after := phasesAroundAct(t, funcs["observePlanActReport"])
	if len(before) < 10 || len(after) < 3 {
		t.Fatalf("found %d phases before the act step and %d after: is observePlanActReport still the reconcile?", len(before), len(after))
	}
	for _, name := range slices.Concat(before, after) {
		for _, path := range reachedWrites(funcs, name) {
			t.Errorf("phase %s writes outside the act step: %s", name, path)
		}
	}
	reached := strings.Join(reachedWrites(funcs, "carryOut"), "\n")
	for _, want := range []string{"patcher.AddFinalizer", "ledger.Bind", "ledger.ExpandClaims", "act.MergePatch", "act.CreateJob", "act.DeleteJob", "ledger.ReportPopulate", "act.CreateChild", "act.ApplyChildren", "act.Delete", "ledger.Leave", "ledger.RecordRealized"} {
		if !strings.Contains(reached, want+" ") {
			t.Errorf("the act step does not reach %s; it reaches:\n%s", want, reached)
		}
	}
}

// parsePackageFuncs parses the package's non-test files into their
// functions and methods, by name.
func parsePackageFuncs(t *testing.T) map[string]*ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range parsed.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				funcs[fn.Name.Name] = fn
			}
		}
	}
	return funcs
}

// phasesAroundAct lists the methods the phase literals of fn name, before
// and after the one of carryOut, in order.
func phasesAroundAct(t *testing.T, fn *ast.FuncDecl) (before, after []string) {
	t.Helper()
	if fn == nil {
		t.Fatal("observePlanActReport not found")
	}
	seenAct := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || len(lit.Elts) != 2 {
			return true
		}
		sel, ok := lit.Elts[1].(*ast.SelectorExpr)
		if !ok {
			return true
		}
		switch {
		case sel.Sel.Name == "carryOut":
			seenAct = true
		case seenAct:
			after = append(after, sel.Sel.Name)
		default:
			before = append(before, sel.Sel.Name)
		}
		return true
	})
	return before, after
}

// reachedWrites lists the write calls fn reaches through the package's
// functions, each as "field.Method in caller".
func reachedWrites(funcs map[string]*ast.FuncDecl, fn string) []string {
	var found []string
	seen := map[string]bool{}
	queue := []string{fn}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		decl := funcs[name]
		if seen[name] || decl == nil {
			continue
		}
		seen[name] = true
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if write := writeCall(call); write != "" {
				found = append(found, write+" in "+name)
			}
			if callee := calleeName(call); callee != "" {
				queue = append(queue, callee)
			}
			return true
		})
	}
	slices.Sort(found)
	return found
}

// writeCall is "field.Method" when call is a write of writeCalls, made on
// a field of that name (r.act.Delete, scope.patcher.Patch, patcher.Patch).
func writeCall(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	var field string
	switch x := sel.X.(type) {
	case *ast.SelectorExpr:
		field = x.Sel.Name
	case *ast.Ident:
		field = x.Name
	}
	if slices.Contains(writeCalls[field], sel.Sel.Name) {
		return field + "." + sel.Sel.Name
	}
	return ""
}

// calleeName names the package function or method call calls, or "".
func calleeName(call *ast.CallExpr) string {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return fun.Name
	case *ast.SelectorExpr:
		if x, ok := fun.X.(*ast.Ident); ok && (x.Name == "r" || x.Name == "scope" || x.Name == "o" || x.Name == "rollout") {
			return fun.Sel.Name
		}
	}
	return ""
}
