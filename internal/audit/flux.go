package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	generator "github.com/fluxcd/pkg/kustomize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/resmap"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// fluxRenderFields are the Kustomization spec fields a flux recipe
// reproduces, as kustomize-controller's build does
// (internal/controller/kustomization_controller.go, generate and build;
// fluxcd/pkg/kustomize kustomize_generator.go, GenerateManifest). Any other
// recorded field (decryption, say) makes the audit Unverifiable.
var fluxRenderFields = []string{
	"path", "targetNamespace", "namePrefix", "nameSuffix", "patches", "patchesStrategicMerge",
	"patchesJson6902", "images", "components", "ignoreMissingComponents", "commonMetadata",
	"postBuild", "buildMetadata",
}

// flux renders a path as a Flux Kustomization with the recorded spec.
type flux struct {
	spec map[string]any
	raw  string
}

// fluxRecipeFor checks the recorded Kustomization settings: every field
// must be one the recipe reproduces, and every substitution source must be
// one the audit can re-read, which no ConfigMap or Secret is.
func fluxRecipeFor(render *embedopsv1.RenderInputs) (recipe, string) {
	spec := map[string]any{}
	if err := json.Unmarshal([]byte(render.Spec), &spec); err != nil {
		return nil, fmt.Sprintf("the recorded Kustomization spec cannot be read: %v", err)
	}
	for field := range spec {
		if !slices.Contains(fluxRenderFields, field) {
			return nil, fmt.Sprintf("the Kustomization's spec.%s is not reproduced by the audit", field)
		}
	}
	var inputs []string
	for _, from := range render.SubstituteFrom {
		if from.Optional && from.ResourceVersion == "" {
			continue // absent and optional: kustomize-controller skipped it too
		}
		input := from.Kind + "/" + from.Name
		if from.ResourceVersion != "" {
			input += " (resourceVersion " + from.ResourceVersion + ")"
		}
		inputs = append(inputs, input)
	}
	if len(inputs) > 0 {
		return nil, "post-build substitution reads " + strings.Join(inputs, ", ") + ", which is not in git"
	}
	return flux{spec: spec, raw: render.Spec}, ""
}

func (f flux) key() string { return "flux\x00" + f.raw }

// namespace is the targetNamespace, where kustomize-controller applies
// every namespaced object.
func (f flux) namespace() string {
	namespace, _ := f.spec["targetNamespace"].(string)
	return namespace
}

// build generates the kustomization over the recorded spec, builds it with
// kustomize-controller's options, then substitutes the inline variables
// and sets the common metadata per resource, in kustomize-controller's
// order.
func (f flux) build(fs *treeFS, dir string) *rendering {
	if !fs.IsDir(dir) {
		return &rendering{err: errPathNotFound}
	}
	ks := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "spec": f.spec,
	}}
	if err := f.generate(fs, dir, ks); err != nil {
		return &rendering{err: err}
	}
	m, err := generator.Build(fs, dir)
	if err != nil {
		return &rendering{err: fmt.Errorf("kustomize build failed: %w", err)}
	}
	if err := f.postBuild(m, ks); err != nil {
		return &rendering{err: err}
	}
	return f.withCommonMetadata(m)
}

// generate writes the kustomization kustomize-controller generates into
// fs. The generator reads from disk only, so the directory's files are
// copied to a temporary directory at the same path, and the components the
// spec names are created there when the tree has them.
func (f flux) generate(fs *treeFS, dir string, ks unstructured.Unstructured) error {
	work, err := os.MkdirTemp("", "embedops-audit-")
	if err != nil {
		return fmt.Errorf("creating a work directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	if err := copyOut(fs, dir, work); err != nil {
		return err
	}
	components, _, _ := unstructured.NestedStringSlice(f.spec, "components")
	for _, component := range components {
		p := path.Join(dir, component)
		if rel, ok := relative(p); ok && fs.Exists(p) {
			if err := os.MkdirAll(filepath.Join(work, rel), 0o750); err != nil {
				return fmt.Errorf("copying component %s: %w", component, err)
			}
		}
	}
	manifest, kfile, _, err := generator.NewGenerator(work, ks).GenerateManifest(filepath.Join(work, dir))
	if err != nil {
		return fmt.Errorf("generating the kustomization: %w", err)
	}
	rel, err := filepath.Rel(work, kfile)
	if err != nil {
		return fmt.Errorf("placing the kustomization: %w", err)
	}
	return fs.WriteFile(filepath.ToSlash(rel), manifest)
}

// copyOut writes every file under dir in fs below work, at the same path.
func copyOut(fs *treeFS, dir, work string) error {
	return fs.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, ok := relative(p)
		if !ok {
			return nil
		}
		target := filepath.Join(work, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o750)
		}
		data, err := fs.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
}

// postBuild runs the variable substitution of every resource with the
// inline variables; substitution sources were refused before.
func (f flux) postBuild(m resmap.ResMap, ks unstructured.Unstructured) error {
	if _, ok := f.spec["postBuild"]; !ok {
		return nil
	}
	strategy, _, _ := unstructured.NestedString(f.spec, "postBuild", "substituteStrategy")
	for _, res := range m.Resources() {
		if res.GetName() == "" || res.GetKind() == "" || res.GetApiVersion() == "" {
			return fmt.Errorf("failed to decode Kubernetes apiVersion, kind and name from: %v", res.String())
		}
		// kustomize-controller runs with StrictPostBuildSubstitutions off
		// by default.
		out, err := generator.SubstituteVariables(context.Background(), nil, ks, res,
			generator.SubstituteWithDryRun(true), generator.SubstituteWithStrict(false),
			generator.SubstituteWithAlways(strategy == "Always"))
		if err != nil {
			return fmt.Errorf("post build failed for '%s/%s': %w", res.GetGvk(), res.GetName(), err)
		}
		if out != nil {
			if _, err := m.Replace(res); err != nil {
				return err
			}
		}
	}
	return nil
}

// withCommonMetadata encodes the build after setting commonMetadata, as
// kustomize-controller does before applying.
func (f flux) withCommonMetadata(m resmap.ResMap) *rendering {
	data, err := m.AsYaml()
	if err != nil {
		return &rendering{err: fmt.Errorf("kustomize build failed: %w", err)}
	}
	labels, _, _ := unstructured.NestedStringMap(f.spec, "commonMetadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(f.spec, "commonMetadata", "annotations")
	if len(labels) == 0 && len(annotations) == 0 {
		return &rendering{resources: data}
	}
	objects, err := ssautil.ReadObjects(bytes.NewReader(data))
	if err != nil {
		return &rendering{err: fmt.Errorf("reading the build: %w", err)}
	}
	ssautil.SetCommonMetadata(objects, labels, annotations)
	out, err := ssautil.ObjectsToYAML(objects)
	if err != nil {
		return &rendering{err: fmt.Errorf("encoding the build: %w", err)}
	}
	return &rendering{resources: []byte(out)}
}
