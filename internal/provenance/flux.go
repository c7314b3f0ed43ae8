package provenance

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Flux labels set by kustomize-controller on what it applies.
const (
	FluxNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	FluxNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
)

var kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

// flux follows the kustomize-controller labels to the Kustomization. Its
// lastAttemptedRevision is set before apply (kustomize-controller
// internal/controller/kustomization_controller.go, reconcile: "Report
// progress and set last attempted revision in status"), so it is the
// revision being applied even while the apply is under way.
func (r *Resolver) flux(ctx context.Context, obj client.Object) (Resolution, bool, error) {
	labels := obj.GetLabels()
	name, namespace := labels[FluxNameLabel], labels[FluxNamespaceLabel]
	if name == "" || namespace == "" {
		return Resolution{}, false, nil
	}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	ks, found, err := r.getOptional(ctx, kustomizationGVK, key)
	if err != nil || !found {
		return notFound("Kustomization", key), false, err
	}
	attempted, _, _ := unstructured.NestedString(ks.Object, "status", "lastAttemptedRevision")
	applied, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
	inInventory := inFluxInventory(ks, obj)
	if !inInventory && (attempted == "" || attempted == applied) {
		// Applied and still not in the inventory: the labels were copied.
		res := notFound("Kustomization", key)
		res.Message = fmt.Sprintf("Kustomization %s has applied %q without the server in its inventory: its labels were copied", key, applied)
		return res, false, nil
	}
	res, err := r.fluxSource(ctx, ks, attempted)
	if err != nil {
		return Resolution{}, false, err
	}
	if !inInventory && res.Reason == "" {
		res.Reason = embedopsv1.SourcePendingReason
		res.Message = fmt.Sprintf("Kustomization %s is applying %s and has not listed the server in its inventory yet", key, attempted)
	}
	return res, true, nil
}

// fluxSource fills the source from the Kustomization, its render inputs and
// its source object: a GitRepository's URL and what it adds to its
// artifact, or the git origin of an OCIRepository's artifact.
func (r *Resolver) fluxSource(ctx context.Context, ks *unstructured.Unstructured, revision string) (Resolution, error) {
	path, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
	kind, src, err := r.fluxSourceObject(ctx, ks)
	if err != nil {
		return Resolution{}, err
	}
	render, err := r.fluxRenderInputs(ctx, ks)
	if err != nil {
		return Resolution{}, err
	}
	source := embedopsv1.DecisionSource{Method: embedopsv1.SourceFlux, Path: path, ObjectRef: objectRef(ks), Render: render}
	where := fmt.Sprintf("Kustomization %s/%s", ks.GetNamespace(), ks.GetName())
	switch kind {
	case "OCIRepository":
		return ociSource(source, ks, src, revision, where), nil
	case "GitRepository":
		if src != nil {
			source.Repository, _, _ = unstructured.NestedString(src.Object, "spec", "url")
			if render.Source, err = r.gitSourceInputs(ctx, src); err != nil {
				return Resolution{}, err
			}
		}
	}
	return withRevision(source, revision, where), nil
}

// fluxSourceObject reads the Kustomization's source object; an absent one
// is nil rather than an error.
func (r *Resolver) fluxSourceObject(ctx context.Context, ks *unstructured.Unstructured) (string, *unstructured.Unstructured, error) {
	kind, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "kind")
	name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	namespace, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
	if (kind != "GitRepository" && kind != "OCIRepository") || name == "" {
		return kind, nil, nil
	}
	if namespace == "" {
		namespace = ks.GetNamespace()
	}
	src, _, err := r.getOptional(ctx, sourceGVK(kind), types.NamespacedName{Namespace: namespace, Name: name})
	return kind, src, err
}

// sourceGVK is a source-controller kind.
func sourceGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: kind}
}

// inFluxInventory reports whether the Kustomization's inventory lists obj.
func inFluxInventory(ks *unstructured.Unstructured, obj client.Object) bool {
	entries, _, _ := unstructured.NestedSlice(ks.Object, "status", "inventory", "entries")
	want := obj.GetNamespace() + "_" + obj.GetName() + "_" + embedopsv1.GroupVersion.Group + "_" + embedopsv1.EmbeddingServerKind
	for _, entry := range entries {
		if fields, ok := entry.(map[string]any); ok && fields["id"] == want {
			return true
		}
	}
	return false
}
