package healthcheck

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestFluxStatus(t *testing.T) {
	e := Expr{InProgress: "status.phase == 'Busy'", Failed: "status.phase == 'Broken'", Current: "status.phase == 'Fine'"}
	object := func(generation, observed any, phase string) map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"generation": generation},
			"status":   map[string]any{"observedGeneration": observed, "phase": phase},
		}
	}
	tests := []struct {
		name string
		obj  map[string]any
		want string
		err  bool
	}{
		{name: "current", obj: object(1, 1, "Fine"), want: Current},
		{name: "failed", obj: object(1, 1, "Broken"), want: Failed},
		{name: "in progress", obj: object(1, 1, "Busy"), want: InProgress},
		{name: "nothing true is in progress", obj: object(1, 1, "Other"), want: InProgress},
		{name: "generation behind, whatever the expressions", obj: object(2.0, 1.0, "Fine"), want: InProgress},
		{name: "an expression that cannot evaluate", obj: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := FluxStatus(e, tt.obj)
			if tt.err {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
