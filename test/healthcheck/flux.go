package healthcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Flux statuses, as kstatus names them. An expression that fails to
// evaluate is an error, which kustomize-controller treats as Unknown.
const (
	InProgress = "InProgress"
	Failed     = "Failed"
	Current    = "Current"
)

// ShippedKustomization is the Flux Kustomization embedops ships, relative
// to the repository root.
var ShippedKustomization = filepath.Join("config", "flux", "embedops-servers.yaml")

// Expr is one entry of a Flux Kustomization's spec.healthCheckExprs
// (kustomize-controller v1.9.6).
type Expr struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	InProgress string `json:"inProgress"`
	Failed     string `json:"failed"`
	Current    string `json:"current"`
}

// ShippedExprs reads the healthCheckExprs of the shipped Kustomization.
func ShippedExprs(root string) ([]Expr, error) {
	data, err := os.ReadFile(filepath.Join(root, ShippedKustomization))
	if err != nil {
		return nil, fmt.Errorf("reading the shipped Kustomization: %w", err)
	}
	var ks struct {
		Spec struct {
			HealthCheckExprs []Expr `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &ks); err != nil {
		return nil, fmt.Errorf("decoding the shipped Kustomization: %w", err)
	}
	if len(ks.Spec.HealthCheckExprs) == 0 {
		return nil, errors.New("the shipped Kustomization has no healthCheckExprs")
	}
	return ks.Spec.HealthCheckExprs, nil
}

// ExprFor returns the expressions for kind.
func ExprFor(exprs []Expr, kind string) (Expr, error) {
	for _, e := range exprs {
		if e.Kind == kind {
			return e, nil
		}
	}
	return Expr{}, fmt.Errorf("no healthCheckExprs for %s", kind)
}

// Env is the CEL environment of fluxcd/pkg/runtime/cel.NewExpression.
func Env(vars ...cel.EnvOption) (*cel.Env, error) {
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

// FluxStatus evaluates e against obj as fluxcd/pkg/runtime/cel's
// StatusEvaluator does (runtime/cel/status_evaluator.go, Evaluate): an
// int64 observedGeneration that differs from an int64 generation is in
// progress; then inProgress, failed and current, in order, on parsed (not
// type-checked) expressions; nothing true is in progress. obj is first
// decoded as an unstructured object is, integers as int64.
func FluxStatus(e Expr, obj map[string]any) (string, error) {
	obj, err := unstructuredContent(obj)
	if err != nil {
		return "", err
	}
	observed, ok, err := unstructured.NestedInt64(obj, "status", "observedGeneration")
	if err == nil && ok {
		generation, ok, err := unstructured.NestedInt64(obj, "metadata", "generation")
		if err == nil && ok && observed != generation {
			return InProgress, nil
		}
	}
	env, err := Env()
	if err != nil {
		return "", err
	}
	for _, step := range []struct {
		expr, status string
	}{{e.InProgress, InProgress}, {e.Failed, Failed}, {e.Current, Current}} {
		if step.expr == "" {
			continue
		}
		ok, err := evalBool(env, step.expr, obj)
		if err != nil {
			return "", err
		}
		if ok {
			return step.status, nil
		}
	}
	return InProgress, nil
}

// evalBool parses and evaluates one boolean expression.
func evalBool(env *cel.Env, expr string, obj map[string]any) (bool, error) {
	ast, issues := env.Parse(expr)
	if issues.Err() != nil {
		return false, issues.Err()
	}
	prog, err := env.Program(ast)
	if err != nil {
		return false, err
	}
	val, _, err := prog.Eval(obj)
	if err != nil {
		return false, fmt.Errorf("evaluating %q: %w", expr, err)
	}
	b, ok := val.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%q is not a boolean", expr)
	}
	return bool(b), nil
}

// unstructuredContent round-trips obj through JSON and decodes it as
// client-go decodes an unstructured object: whole numbers become int64.
func unstructuredContent(obj map[string]any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding the object: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("decoding the object: %w", err)
	}
	return u.Object, nil
}
