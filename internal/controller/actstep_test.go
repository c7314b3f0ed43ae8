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

// A server reconcile, a deleted server's too, reads and plans, then
// writes in the act step (carryOut), round by round, then reports: no
// phase reaches a write, runRounds runs carryOut as the act step, and
// carryOut reaches every kind of write a reconcile makes before its status
// patch. The phases are read from the source of observePlanActReport and
// reconcileDelete, the calls from the package's source.
func TestOnlyTheActStepWrites(t *testing.T) {
	t.Parallel()
	funcs := parsePackageFuncs(t)
	live, deleted := phaseMethods(t, funcs, "observePlanActReport"), phaseMethods(t, funcs, "reconcileDelete")
	if len(live) < 15 || len(deleted) < 2 {
		t.Fatalf("found %d phases of a live server and %d of a deleted one: are observePlanActReport and reconcileDelete still the reconciles?", len(live), len(deleted))
	}
	for _, name := range slices.Concat(live, deleted) {
		for _, path := range reachedWrites(funcs, name) {
			t.Errorf("phase %s writes outside the act step: %s", name, path)
		}
	}
	if act := phaseMethods(t, funcs, "runRounds"); !slices.Equal(act, []string{"carryOut"}) {
		t.Errorf("runRounds runs %v as its act step, want carryOut", act)
	}
	reached := strings.Join(reachedWrites(funcs, "carryOut"), "\n")
	for _, want := range []string{"patcher.AddFinalizer", "ledger.Bind", "ledger.ExpandClaims", "act.MergePatch", "act.CreateJob", "act.DeleteJob",
		"ledger.ReportPopulate", "ledger.RecordRealized", "act.CreateChild", "act.ApplyChildren", "act.Delete", "ledger.Leave"} {
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

// phaseMethods lists, in order, the methods the phase literals
// ({"name", r.method}) in the function named name run.
func phaseMethods(t *testing.T, funcs map[string]*ast.FuncDecl, name string) []string {
	t.Helper()
	fn := funcs[name]
	if fn == nil {
		t.Fatalf("%s not found", name)
	}
	var methods []string
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || len(lit.Elts) != 2 {
			return true
		}
		if _, ok := lit.Elts[0].(*ast.BasicLit); !ok {
			return true
		}
		if sel, ok := lit.Elts[1].(*ast.SelectorExpr); ok {
			methods = append(methods, sel.Sel.Name)
		}
		return true
	})
	return methods
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
