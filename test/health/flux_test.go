package health

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// healthCheckExpr is one entry of a Flux Kustomization's
// spec.healthCheckExprs (kustomize-controller v1.9.6).
type healthCheckExpr struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	InProgress string `json:"inProgress"`
	Failed     string `json:"failed"`
	Current    string `json:"current"`
}

// Flux statuses, as kstatus names them; unknown is an evaluation error.
const (
	inProgress = "InProgress"
	failed     = "Failed"
	current    = "Current"
	unknown    = "Unknown"
)

func TestFluxHealthCheckExprs(t *testing.T) {
	exprs := fluxHealthCheckExprs(t)
	// Each Argo CD test object, with the status Flux must give it.
	want := map[string]map[string]string{
		"EmbeddingServer": {
			"suspended.yaml":          inProgress,
			"no_status.yaml":          unknown,
			"generation_behind.yaml":  inProgress,
			"stalled.yaml":            failed,
			"reconciling.yaml":        inProgress,
			"healthy.yaml":            current,
			"degraded.yaml":           failed,
			"no_ready_condition.yaml": inProgress,
		},
		"ModelCacheBinding": {
			"no_status.yaml": unknown,
			"active.yaml":    current,
			"retiring.yaml":  inProgress,
			"released.yaml":  current,
			"drift.yaml":     failed,
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
				got, err := fluxStatus(e, obj)
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
				env, err := fluxEnv(
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
func fluxHealthCheckExprs(t *testing.T) []healthCheckExpr {
	t.Helper()
	var exprs []healthCheckExpr
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
				Wait             bool              `json:"wait"`
				HealthCheckExprs []healthCheckExpr `json:"healthCheckExprs"`
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

// fluxEnv is the CEL environment of fluxcd/pkg/runtime/cel.NewExpression.
func fluxEnv(vars ...cel.EnvOption) (*cel.Env, error) {
	return cel.NewEnv(append([]cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	}, vars...)...)
}

// fluxStatus evaluates e against obj as fluxcd/pkg/runtime/cel's
// StatusEvaluator does: a set observedGeneration that differs from the
// generation is in progress; then inProgress, failed and current, in order,
// on parsed (not type-checked) expressions; nothing true is in progress.
func fluxStatus(e healthCheckExpr, obj map[string]any) (string, error) {
	if status, ok := obj["status"].(map[string]any); ok {
		if observed, ok := status["observedGeneration"]; ok {
			metadata, _ := obj["metadata"].(map[string]any)
			if generation, ok := metadata["generation"]; ok && observed != generation {
				return inProgress, nil
			}
		}
	}
	env, err := fluxEnv()
	if err != nil {
		return "", err
	}
	for _, step := range []struct {
		expr, status string
	}{{e.InProgress, inProgress}, {e.Failed, failed}, {e.Current, current}} {
		if step.expr == "" {
			continue
		}
		ast, issues := env.Parse(step.expr)
		if issues.Err() != nil {
			return "", issues.Err()
		}
		prog, err := env.Program(ast)
		if err != nil {
			return "", err
		}
		val, _, err := prog.Eval(obj)
		if err != nil {
			return "", fmt.Errorf("evaluating %q: %w", step.expr, err)
		}
		b, ok := val.(types.Bool)
		if !ok {
			return "", fmt.Errorf("%q is not a boolean", step.expr)
		}
		if b {
			return step.status, nil
		}
	}
	return inProgress, nil
}
