package audit

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

func TestInlineHelmValues(t *testing.T) {
	cases := []struct {
		name, values, object, want string
	}{
		{"values", "a: 1\n", "", "a: 1\n"},
		{"valuesObject wins", "a: 1\n", `{"a":2}`, "a: 2\n"},
		{"nothing", "  \n", "null", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := InlineHelmValues(tc.values, json.RawMessage(tc.object))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal(tc.want))
		})
	}
}

func TestInlineHelmValuesRefusesWhatIsNoMap(t *testing.T) {
	_, err := InlineHelmValues("- a\n- b\n", nil)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("helm values")))
}

func TestCleanSetParameter(t *testing.T) {
	g := NewWithT(t)
	g.Expect(cleanSetParameter("a,b")).To(Equal(`a\,b`))
	g.Expect(cleanSetParameter(`a\,b`)).To(Equal(`a\,b`))
	g.Expect(cleanSetParameter("{a,b}")).To(Equal("{a,b}"))
}

// FuzzInlineHelmValues checks that inline values never panic and that
// whatever they give is a YAML map helm can merge.
func FuzzInlineHelmValues(f *testing.F) {
	for _, seed := range [][2]string{{"a: 1\n", ""}, {"", `{"a":{"b":[1,2]}}`}, {"- x", ""}, {"a: [", ""}, {"", "[1]"}, {"", `"s"`}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, values, object string) {
		raw := json.RawMessage(object)
		if object != "" && !json.Valid(raw) {
			return // the API server stores only valid JSON
		}
		out, err := InlineHelmValues(values, raw)
		if err != nil || out == nil {
			return
		}
		merged := map[string]any{}
		if err := yaml.Unmarshal(out, &merged); err != nil {
			t.Fatalf("inline values %q / %q gave %q, which is no map: %v", values, object, out, err)
		}
	})
}
