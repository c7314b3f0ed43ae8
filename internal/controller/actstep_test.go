package controller

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// writeCalls are the methods that write to the API server, by the field
// of the reconciler or scope they are called on. Dry runs (act's
// DryRunCreate and DryRunApply) write nothing and are not among them.
// Events are not among them: the recorder sends them on its own, and
// phases report with them.
var writeCalls = map[string][]string{
	"act":     {"CreateChild", "ApplyChildren", "CreateJob", "DeleteJob", "MergePatch", "Delete"},
	"ledger":  {"Bind", "Leave", "ExpandClaims", "RecordRealized", "ReportPopulate", "Advance"},
	"patcher": {"AddFinalizer", "Patch"},
	"servers": {"Create", "Update", "Patch", "Delete"},
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
	if act := phaseMethods(t, funcs, "runRounds"); !slices.Equal(act, []string{"carryOut"}) || !actsInEachRound(funcs["runRounds"][0]) {
		t.Errorf("runRounds runs %v as its act step, want carryOut in each round", act)
	}
	for _, name := range []string{"observePlanActReport", "runRounds", "reconcileDelete"} {
		if writes := directWrites(funcs[name][0]); len(writes) > 0 {
			t.Errorf("%s writes itself: %v", name, writes)
		}
	}
	deletion := strings.Join(reachedWrites(funcs, "carryOutDeletion"), "\n")
	for _, want := range []string{"act.Delete", "ledger.Leave"} {
		if !strings.Contains(deletion, want+" ") {
			t.Errorf("the act step of a deleted server does not reach %s; it reaches:\n%s", want, deletion)
		}
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
// functions and methods, by name (methods of several types may share one).
func parsePackageFuncs(t *testing.T) map[string][]*ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string][]*ast.FuncDecl{}
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
				funcs[fn.Name.Name] = append(funcs[fn.Name.Name], fn)
			}
		}
	}
	return funcs
}

// phaseMethods lists, in order, the methods the phase literals
// ({"name", r.method}) in the function named name run.
func phaseMethods(t *testing.T, funcs map[string][]*ast.FuncDecl, name string) []string {
	t.Helper()
	if len(funcs[name]) != 1 {
		t.Fatalf("want one function %s, found %d", name, len(funcs[name]))
	}
	fn := funcs[name][0]
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

// actsInEachRound reports whether fn's phase literal of carryOut is in
// the body of a range loop (over the rounds).
func actsInEachRound(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		loop, ok := n.(*ast.RangeStmt)
		if !ok {
			return true
		}
		ast.Inspect(loop.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "carryOut" {
				found = true
			}
			return true
		})
		return true
	})
	return found
}

// directWrites lists the write calls in fn's own body.
func directWrites(fn *ast.FuncDecl) []string {
	var writes []string
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if write := writeCall(call); write != "" {
				writes = append(writes, write)
			}
		}
		return true
	})
	return writes
}

// reachedWrites lists the write calls fn reaches through the package's
// functions, each as "field.Method in caller".
func reachedWrites(funcs map[string][]*ast.FuncDecl, fn string) []string {
	var found []string
	seen := map[string]bool{}
	queue := []string{fn}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, decl := range funcs[name] {
			ast.Inspect(decl.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if write := writeCall(call); write != "" {
					found = append(found, write+" in "+name)
				}
				if callee := calleeName(call); len(funcs[callee]) > 0 {
					queue = append(queue, callee)
				}
				return true
			})
		}
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

// calleeName names the package function or method call calls, or "": any
// call of that name is followed (a method of another type with the same
// name is followed too, which can only find more writes).
func calleeName(call *ast.CallExpr) string {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return fun.Name
	case *ast.SelectorExpr:
		return fun.Sel.Name
	}
	return ""
}

// A round's error keeps a phase's terminal error terminal, unless the act
// step failed too: then the write is retried.
func TestARoundsErrorRetriesAFailedWrite(t *testing.T) {
	t.Parallel()
	terminal := reconcile.TerminalError(errors.New("spec refused"))
	conflict := errors.New("conflict")
	for _, tc := range []struct {
		name            string
		planErr, actErr error
		want            string
		wantTerminal    bool
	}{
		{"nothing failed", nil, nil, "", false},
		{"a phase stalled", terminal, nil, "terminal error: spec refused", true},
		{"a write failed", nil, conflict, "conflict", false},
		{"both", terminal, conflict, "conflict (planning failed too: terminal error: spec refused)", false},
	} {
		err := roundError(tc.planErr, tc.actErr)
		if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || (err != nil && got != tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
		if terminal := errors.Is(err, reconcile.TerminalError(nil)); terminal != tc.wantTerminal {
			t.Errorf("%s: terminal %v, want %v", tc.name, terminal, tc.wantTerminal)
		}
		if tc.actErr != nil && !errors.Is(err, tc.actErr) {
			t.Errorf("%s: %v does not wrap the act step's error", tc.name, err)
		}
	}
}
