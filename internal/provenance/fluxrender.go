package provenance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// fluxIgnoredFields are the Kustomization spec fields that do not change
// what kustomize-controller renders (api/v1/kustomization_types.go): how
// often, where from, how it applies and waits. Every other field is
// recorded, so a field the audit does not reproduce is seen, not dropped.
var fluxIgnoredFields = []string{
	"interval", "retryInterval", "timeout", "suspend", "sourceRef", "dependsOn",
	"prune", "deletionPolicy", "wait", "force", "healthChecks", "healthCheckExprs",
	"serviceAccountName", "kubeConfig",
}

// FluxRenderSpec is the render-relevant part of a Kustomization's spec as
// JSON: the spec without fluxIgnoredFields.
func FluxRenderSpec(ks *unstructured.Unstructured) (string, error) {
	spec, _, err := unstructured.NestedMap(ks.Object, "spec")
	if err != nil {
		return "", fmt.Errorf("reading the Kustomization's spec: %w", err)
	}
	kept := maps.Clone(spec)
	for _, field := range fluxIgnoredFields {
		delete(kept, field)
	}
	data, err := json.Marshal(kept)
	if err != nil {
		return "", fmt.Errorf("encoding the Kustomization's spec: %w", err)
	}
	return string(data), nil
}

// fluxRenderInputs records the Kustomization's render-relevant spec and
// the versions of its substitution sources. Only the metadata of those
// ConfigMaps and Secrets is read: a Secret's value is never seen.
func (r *Resolver) fluxRenderInputs(ctx context.Context, ks *unstructured.Unstructured) (*embedopsv1.RenderInputs, error) {
	spec, err := FluxRenderSpec(ks)
	if err != nil {
		return nil, err
	}
	render := &embedopsv1.RenderInputs{Spec: spec}
	refs, _, _ := unstructured.NestedSlice(ks.Object, "spec", "postBuild", "substituteFrom")
	for _, ref := range refs {
		fields, ok := ref.(map[string]any)
		if !ok {
			continue
		}
		kind, _ := fields["kind"].(string)
		name, _ := fields["name"].(string)
		optional, _ := fields["optional"].(bool)
		if (kind != "ConfigMap" && kind != "Secret") || name == "" {
			continue
		}
		version, err := r.resourceVersion(ctx, kind, types.NamespacedName{Namespace: ks.GetNamespace(), Name: name})
		if err != nil {
			return nil, err
		}
		render.SubstituteFrom = append(render.SubstituteFrom, embedopsv1.SubstitutionSource{
			Kind: kind, Name: name, Optional: optional, ResourceVersion: version,
		})
	}
	return render, nil
}

// resourceVersion reads a ConfigMap's or Secret's metadata only; "" when
// it does not exist.
func (r *Resolver) resourceVersion(ctx context.Context, kind string, key types.NamespacedName) (string, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1GVK(kind))
	err := r.Reader.Get(ctx, key, meta)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	return meta.GetResourceVersion(), nil
}

// corev1GVK is the GroupVersionKind of a core kind.
func corev1GVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Version: "v1", Kind: kind}
}
