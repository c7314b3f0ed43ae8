package health

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite config/argocd/argocd-cm.yaml from the health.lua files")

// configDir is the repository's config directory, seen from this package.
const configDir = "../../config"

// customizationsDir holds the health checks in Argo CD's own layout:
// <group>/<kind>/health.lua with health_test.yaml and testdata/.
var customizationsDir = filepath.Join(configDir, "argocd", "resource_customizations")

// argocdCMPath is the argocd-cm snippet that inlines the health checks.
var argocdCMPath = filepath.Join(configDir, "argocd", "argocd-cm.yaml")

// healthKinds are the group/kind directories with a health.lua.
var healthKinds = []string{"embedops.dev/EmbeddingServer", "embedops.dev/ModelCacheBinding"}

// healthTests is Argo CD's health_test.yaml.
type healthTests struct {
	Tests []healthCase `json:"tests"`
}

// healthCase is one entry of health_test.yaml.
type healthCase struct {
	HealthStatus healthStatus `json:"healthStatus"`
	InputPath    string       `json:"inputPath"`
}

// healthStatus is what a health script returns.
type healthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func TestHealthLua(t *testing.T) {
	for _, kind := range healthKinds {
		dir := filepath.Join(customizationsDir, kind)
		script := readFile(t, filepath.Join(dir, "health.lua"))
		var cases healthTests
		readYAML(t, filepath.Join(dir, "health_test.yaml"), &cases)
		if len(cases.Tests) == 0 {
			t.Fatalf("%s/health_test.yaml has no tests", kind)
		}
		for _, tc := range cases.Tests {
			t.Run(kind+"/"+tc.InputPath, func(t *testing.T) {
				g := NewWithT(t)
				var obj map[string]any
				readYAML(t, filepath.Join(dir, tc.InputPath), &obj)
				got, err := runHealth(script, obj)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(tc.HealthStatus))
			})
		}
	}
}

func TestHealthLuaCoversEveryTestdataFile(t *testing.T) {
	for _, kind := range healthKinds {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			dir := filepath.Join(customizationsDir, kind)
			var cases healthTests
			readYAML(t, filepath.Join(dir, "health_test.yaml"), &cases)
			listed := map[string]bool{}
			for _, tc := range cases.Tests {
				listed[tc.InputPath] = true
			}
			files, err := filepath.Glob(filepath.Join(dir, "testdata", "*.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).NotTo(BeEmpty())
			for _, f := range files {
				rel, err := filepath.Rel(dir, f)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(listed).To(HaveKey(filepath.ToSlash(rel)), "testdata file without a case in health_test.yaml")
			}
		})
	}
}

func TestLuaValue(t *testing.T) {
	tests := []struct {
		name  string
		in    any
		check string
	}{
		{name: "string", in: "a", check: `return v == "a"`},
		{name: "float", in: 1.5, check: `return v == 1.5`},
		{name: "int64", in: int64(3), check: `return v == 3`},
		{name: "int", in: 2, check: `return v == 2`},
		{name: "bool", in: true, check: `return v == true`},
		{name: "nil", in: nil, check: `return v == nil`},
		{name: "slice is 1-based", in: []any{"x", "y"}, check: `return #v == 2 and v[1] == "x" and v[2] == "y"`},
		{name: "map", in: map[string]any{"a": map[string]any{"b": false}}, check: `return v.a.b == false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			l := newArgoLuaState()
			defer l.Close()
			v, err := luaValue(l, tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			l.SetGlobal("v", v)
			g.Expect(l.DoString(tt.check)).To(Succeed())
			g.Expect(l.Get(-1)).To(Equal(lua.LTrue))
		})
	}
	t.Run("unsupported type", func(t *testing.T) {
		g := NewWithT(t)
		l := newArgoLuaState()
		defer l.Close()
		_, err := luaValue(l, struct{}{})
		g.Expect(err).To(HaveOccurred())
	})
}

func TestArgoCDConfigMapInlinesTheScripts(t *testing.T) {
	g := NewWithT(t)
	want, err := argocdConfigMap()
	g.Expect(err).NotTo(HaveOccurred())
	if *update {
		g.Expect(os.WriteFile(argocdCMPath, []byte(want), 0o644)).To(Succeed())
	}
	g.Expect(readFile(t, argocdCMPath)).To(Equal(want), "argocd-cm.yaml is stale: run go test ./test/health -update")

	var cm struct {
		Data map[string]string `json:"data"`
	}
	readYAML(t, argocdCMPath, &cm)
	g.Expect(cm.Data).To(HaveLen(len(healthKinds)))
	for _, kind := range healthKinds {
		script := readFile(t, filepath.Join(customizationsDir, kind, "health.lua"))
		g.Expect(cm.Data).To(HaveKeyWithValue(healthKey(kind), script))
	}
}

// runHealth runs an Argo CD health script with obj as the global `obj`.
func runHealth(script string, obj map[string]any) (healthStatus, error) {
	l := newArgoLuaState()
	defer l.Close()
	v, err := luaValue(l, obj)
	if err != nil {
		return healthStatus{}, err
	}
	l.SetGlobal("obj", v)
	if err := l.DoString(script); err != nil {
		return healthStatus{}, fmt.Errorf("running the script: %w", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return healthStatus{}, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	status, ok := ret.RawGetString("status").(lua.LString)
	if !ok {
		return healthStatus{}, fmt.Errorf("the script returned no status string")
	}
	var message string
	if m, ok := ret.RawGetString("message").(lua.LString); ok {
		message = string(m)
	}
	return healthStatus{Status: string(status), Message: message}, nil
}

// newArgoLuaState opens only the libraries Argo CD opens for health scripts
// by default (package, base, table), so a script using more fails here.
func newArgoLuaState() *lua.LState {
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

// luaValue converts decoded YAML or JSON to Lua: maps become tables, slices
// 1-based arrays, numbers LNumber, and nil LNil.
func luaValue(l *lua.LState, v any) (lua.LValue, error) {
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
	case int:
		return lua.LNumber(v), nil
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			lv, err := luaValue(l, e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := l.NewTable()
		for i, e := range v {
			lv, err := luaValue(l, e)
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

// healthKey is the argocd-cm key of a group/kind's health check.
func healthKey(kind string) string {
	return "resource.customizations.health." + strings.Replace(kind, "/", "_", 1)
}

// argocdConfigMap renders argocd-cm.yaml from the health.lua files.
func argocdConfigMap() (string, error) {
	var b strings.Builder
	b.WriteString(`# Generated by test/health from resource_customizations/*/*/health.lua:
# go test ./test/health -update. Merge these keys into the argocd-cm
# ConfigMap of your Argo CD installation.
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
`)
	kinds := append([]string(nil), healthKinds...)
	sort.Strings(kinds)
	for _, kind := range kinds {
		script, err := os.ReadFile(filepath.Join(customizationsDir, kind, "health.lua"))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "  %s: |\n", healthKey(kind))
		for _, line := range strings.Split(strings.TrimRight(string(script), "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String(), nil
}

// readFile returns a file's content or fails the test.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return string(b)
}

// readYAML decodes a YAML file into out or fails the test.
func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(readFile(t, path)), out); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
}
