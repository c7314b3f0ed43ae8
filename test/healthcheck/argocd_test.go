package healthcheck

import (
	"testing"

	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
)

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
			l := NewArgoLuaState()
			defer l.Close()
			v, err := LuaValue(l, tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			l.SetGlobal("v", v)
			g.Expect(l.DoString(tt.check)).To(Succeed())
			g.Expect(l.Get(-1)).To(Equal(lua.LTrue))
		})
	}
	t.Run("unsupported type", func(t *testing.T) {
		g := NewWithT(t)
		l := NewArgoLuaState()
		defer l.Close()
		_, err := LuaValue(l, struct{}{})
		g.Expect(err).To(HaveOccurred())
	})
}

func TestRunArgoCD(t *testing.T) {
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"generation": 2}}
	tests := []struct {
		name   string
		script string
		want   ArgoCDHealth
		err    bool
	}{
		{name: "status and message", script: `return {status = "Healthy", message = "m"}`, want: ArgoCDHealth{Healthy, "m"}},
		{name: "integers are int64", script: `return {status = obj.metadata.generation == 2 and "Degraded" or "Healthy"}`, want: ArgoCDHealth{Status: Degraded}},
		{name: "an unknown status is Unknown", script: `return {status = "Fine"}`, want: ArgoCDHealth{HealthUnknown, "Lua returned an invalid health status"}},
		{name: "no table", script: `return "Healthy"`, err: true},
		{name: "no string library", script: `return {status = string.upper("healthy")}`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := RunArgoCD(tt.script, obj)
			if tt.err {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
