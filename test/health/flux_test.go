package health

import (
	"path/filepath"
	"testing"

	"github.com/google/cel-go/cel"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/test/healthcheck"
)

// unknown marks an object on which the expressions fail to evaluate.
const unknown = "Unknown"

func TestFluxHealthCheckExprs(t *testing.T) {
	exprs := fluxHealthCheckExprs(t)
	// Each Argo CD test object, with the status Flux must give it.
	want := map[string]map[string]string{
		"EmbeddingServer": {
			"suspended.yaml":          healthcheck.InProgress,
			"no_status.yaml":          unknown,
			"generation_behind.yaml":  healthcheck.InProgress,
			"stalled.yaml":            healthcheck.Failed,
			"reconciling.yaml":        healthcheck.InProgress,
			"healthy.yaml":            healthcheck.Current,
			"scaled_to_zero.yaml":     healthcheck.Current,
			"degraded.yaml":           healthcheck.Failed,
			"image_pull_backoff.yaml": healthcheck.InProgress,
			"unschedulable.yaml":      healthcheck.InProgress,
			"no_ready_condition.yaml": healthcheck.InProgress,
			// Pods past spec.progressDeadline are Stalled.
			"progress_deadline_exceeded.yaml": healthcheck.Failed,
		},
	}
	g := NewWithT(t)
	g.Expect(exprs).To(HaveLen(len(want)))
	for _, e := range exprs {
		g.Expect(e.APIVersion).To(Equal("embedops.dev/v1alpha1"))
		g.Expect(want).To(HaveKey(e.Kind))
		for file, status := range want[e.Kind] {
			t.Run(e.Kind+"/"+file, func(t *testing.T) {
				g := NewWithT(t)
				var obj map[string]any
				readYAML(t, filepath.Join(customizationsDir, "embedops.dev", e.Kind, "testdata", file), &obj)
				got, err := healthcheck.FluxStatus(e, obj)
				if status == unknown {
					g.Expect(err).To(HaveOccurred())
					return
				}
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(status))
			})
		}
	}
}

func TestFluxHealthCheckExprsCompile(t *testing.T) {
	for _, e := range fluxHealthCheckExprs(t) {
		for name, expr := range map[string]string{"current": e.Current, "inProgress": e.InProgress, "failed": e.Failed} {
			t.Run(e.Kind+"/"+name, func(t *testing.T) {
				g := NewWithT(t)
				g.Expect(expr).NotTo(BeEmpty())
				env, err := healthcheck.Env(
					cel.Variable("apiVersion", cel.StringType),
					cel.Variable("kind", cel.StringType),
					cel.Variable("metadata", cel.DynType),
					cel.Variable("spec", cel.DynType),
					cel.Variable("status", cel.DynType),
				)
				g.Expect(err).NotTo(HaveOccurred())
				ast, issues := env.Compile(expr)
				g.Expect(issues.Err()).NotTo(HaveOccurred())
				g.Expect(ast.OutputType()).To(BeElementOf(cel.BoolType, cel.DynType))
			})
		}
	}
}

// fluxHealthCheckExprs reads the healthCheckExprs of the Flux
// Kustomization rendered from config/flux.
func fluxHealthCheckExprs(t *testing.T) []healthcheck.Expr {
	t.Helper()
	var exprs []healthcheck.Expr
	for _, r := range render(t, "flux") {
		if r.GetKind() != "Kustomization" || r.GetApiVersion() != "kustomize.toolkit.fluxcd.io/v1" {
			continue
		}
		b, err := r.AsYAML()
		if err != nil {
			t.Fatalf("encoding %s: %v", r.GetName(), err)
		}
		var k struct {
			Spec struct {
				Wait             bool               `json:"wait"`
				HealthCheckExprs []healthcheck.Expr `json:"healthCheckExprs"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &k); err != nil {
			t.Fatalf("decoding %s: %v", r.GetName(), err)
		}
		if !k.Spec.Wait {
			t.Fatalf("Kustomization %s does not wait, so its healthCheckExprs are never evaluated", r.GetName())
		}
		exprs = append(exprs, k.Spec.HealthCheckExprs...)
	}
	if len(exprs) == 0 {
		t.Fatal("config/flux has no healthCheckExprs")
	}
	return exprs
}
