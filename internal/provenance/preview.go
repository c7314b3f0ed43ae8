package provenance

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// FluxPreview is the source a Kustomization read from a file would
// record, without a cluster: its substitution sources are listed as
// unread (no resourceVersion).
func FluxPreview(ks *unstructured.Unstructured) (embedopsv1.DecisionSource, error) {
	if ks.GetKind() != kustomizationGVK.Kind {
		return embedopsv1.DecisionSource{}, fmt.Errorf("%s is a %s, not a Kustomization", ks.GetName(), ks.GetKind())
	}
	spec, err := FluxRenderSpec(ks)
	if err != nil {
		return embedopsv1.DecisionSource{}, err
	}
	path, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
	render := &embedopsv1.RenderInputs{Spec: spec}
	refs, _, _ := unstructured.NestedSlice(ks.Object, "spec", "postBuild", "substituteFrom")
	for _, ref := range refs {
		fields, _ := ref.(map[string]any)
		kind, _ := fields["kind"].(string)
		name, _ := fields["name"].(string)
		optional, _ := fields["optional"].(bool)
		render.SubstituteFrom = append(render.SubstituteFrom, embedopsv1.SubstitutionSource{Kind: kind, Name: name, Optional: optional})
	}
	return embedopsv1.DecisionSource{Method: embedopsv1.SourceFlux, Path: path, ObjectRef: objectRef(ks), Render: render}, nil
}

// ArgoPreview is the source an Application read from a file would record,
// every source at commit (a preview renders one commit of one repository).
func ArgoPreview(app *unstructured.Unstructured, commit string) (embedopsv1.DecisionSource, error) {
	if app.GetKind() != applicationGVK.Kind {
		return embedopsv1.DecisionSource{}, fmt.Errorf("%s is a %s, not an Application", app.GetName(), app.GetKind())
	}
	sources, err := ApplicationSources(app.Object)
	if err != nil {
		return embedopsv1.DecisionSource{}, err
	}
	for i := range sources {
		sources[i].Revision = commit
	}
	render, err := ArgoRenderInputs(app.Object, sources)
	if err != nil {
		return embedopsv1.DecisionSource{}, err
	}
	index := ManifestSource(sources)
	if index < 0 {
		return embedopsv1.DecisionSource{}, fmt.Errorf("application %s has no source that renders manifests", app.GetName())
	}
	chosen := sources[index]
	return embedopsv1.DecisionSource{
		Method: embedopsv1.SourceArgoCD, Repository: chosen.RepoURL, Path: chosen.Path, Chart: chosen.Chart,
		ObjectRef: objectRef(app), Render: render,
	}, nil
}
