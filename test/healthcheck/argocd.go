package healthcheck

import (
	"fmt"
	"os"
	"path/filepath"

	lua "github.com/yuin/gopher-lua"
)

// Argo CD health statuses (gitops-engine pkg/health).
const (
	Healthy       = "Healthy"
	Progressing   = "Progressing"
	Degraded      = "Degraded"
	Suspended     = "Suspended"
	Missing       = "Missing"
	HealthUnknown = "Unknown"
)

// CustomizationsDir is where config/argocd keeps the health checks, in Argo
// CD's own layout: <group>/<kind>/health.lua with health_test.yaml and
// testdata/, relative to the repository root.
var CustomizationsDir = filepath.Join("config", "argocd", "resource_customizations")

// ArgoCDHealth is what a health script returns.
type ArgoCDHealth struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// ArgoCDScript reads the health.lua of group/kind under root.
func ArgoCDScript(root, groupKind string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, CustomizationsDir, groupKind, "health.lua"))
	if err != nil {
		return "", fmt.Errorf("reading the health script of %s: %w", groupKind, err)
	}
	return string(b), nil
}

// RunArgoCD runs a health script with obj as the global `obj`, as Argo CD
// does (argoproj/argo-cd util/lua/lua.go: runLua, ExecuteHealthLua) with an
// unstructured object (integers int64): a status Argo CD does not know is
// Unknown.
func RunArgoCD(script string, obj map[string]any) (ArgoCDHealth, error) {
	obj, err := unstructuredContent(obj)
	if err != nil {
		return ArgoCDHealth{}, err
	}
	l := NewArgoLuaState()
	defer l.Close()
	v, err := LuaValue(l, obj)
	if err != nil {
		return ArgoCDHealth{}, err
	}
	l.SetGlobal("obj", v)
	if err := l.DoString(script); err != nil {
		return ArgoCDHealth{}, fmt.Errorf("running the script: %w", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return ArgoCDHealth{}, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	status, ok := ret.RawGetString("status").(lua.LString)
	if !ok {
		return ArgoCDHealth{}, fmt.Errorf("the script returned no status string")
	}
	var message string
	if m, ok := ret.RawGetString("message").(lua.LString); ok {
		message = string(m)
	}
	switch string(status) {
	case Healthy, Progressing, Degraded, Suspended, Missing, HealthUnknown:
		return ArgoCDHealth{Status: string(status), Message: message}, nil
	}
	return ArgoCDHealth{Status: HealthUnknown, Message: "Lua returned an invalid health status"}, nil
}

// NewArgoLuaState opens only the libraries Argo CD opens for health scripts
// from argocd-cm (package, base, table; util/lua/lua.go runLua), so a
// script using more fails here. Argo CD also opens a reduced os library,
// which embedops' scripts do not use.
func NewArgoLuaState() *lua.LState {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		l.Push(l.NewFunction(lib.open))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	return l
}

// LuaValue converts decoded YAML or JSON to Lua as Argo CD's decodeValue
// does: maps become tables, slices 1-based arrays, numbers LNumber, and nil
// LNil; other types are an error rather than a silent nil.
func LuaValue(l *lua.LState, v any) (lua.LValue, error) {
	switch v := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(v), nil
	case string:
		return lua.LString(v), nil
	case float64:
		return lua.LNumber(v), nil
	case int64:
		return lua.LNumber(v), nil
	case int32:
		return lua.LNumber(v), nil
	case int:
		return lua.LNumber(v), nil
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			lv, err := LuaValue(l, e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := l.NewTable()
		for i, e := range v {
			lv, err := LuaValue(l, e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	default:
		return nil, fmt.Errorf("unsupported type %T", v)
	}
}
