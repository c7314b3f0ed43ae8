package docs

import (
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"time"
)

// timeUnits are the time package's units a declaration multiplies.
var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// evaluate computes a constant expression of integers and time units
// (100, 30 * time.Second, time.Minute); ok is false for any other.
func evaluate(expr ast.Expr) (value int64, ok bool) {
	switch e := expr.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT {
			return 0, false
		}
		n, err := strconv.ParseInt(e.Value, 0, 64)
		return n, err == nil
	case *ast.SelectorExpr:
		unit, ok := timeUnits[e.Sel.Name]
		if x, isIdent := e.X.(*ast.Ident); !ok || !isIdent || x.Name != "time" {
			return 0, false
		}
		return int64(unit), true
	case *ast.ParenExpr:
		return evaluate(e.X)
	case *ast.BinaryExpr:
		x, okX := evaluate(e.X)
		y, okY := evaluate(e.Y)
		if !okX || !okY || e.Op != token.MUL {
			return 0, false
		}
		return x * y, true
	}
	return 0, false
}

// statedValue reads a value the docs state in parentheses after a name:
// 100, 10 s, 5 min, 2 s.
var statedValue = regexp.MustCompile(`^\((\d+)(?: (ms|s|min|h))?\)`)

// docUnits are the units the docs write.
var docUnits = map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "min": time.Minute, "h": time.Hour}

// StatedValue reads the value stated right after a span, as the code
// would hold it (a duration in nanoseconds); ok is false when none is
// stated.
func StatedValue(after string) (value int64, ok bool) {
	m := statedValue.FindStringSubmatch(after)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	if m[2] == "" {
		return n, true
	}
	return n * int64(docUnits[m[2]]), true
}

// DeclaredValues returns the values the code declares for a name (a
// constant or variable, or the Default<name> constant of an option), by its
// last dotted part.
func (r *Repo) DeclaredValues(name string) []int64 {
	if i := lastDot.FindStringIndex(name); i != nil {
		name = name[i[1]:]
	}
	if values := r.goIndex.values[name]; len(values) > 0 {
		return values
	}
	return r.goIndex.values["Default"+name]
}

// lastDot is the last dot of a qualified name.
var lastDot = regexp.MustCompile(`.*\.`)
