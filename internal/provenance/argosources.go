package provenance

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// ApplicationSource is one source of an Argo CD Application and the
// revision it was synced at (argo-cd pkg/apis/application/v1alpha1/types.go,
// ApplicationSource).
type ApplicationSource struct {
	// RepoURL is a git repository or a Helm chart repository.
	RepoURL string
	// Path is the directory in a git repository.
	Path string
	// Chart is the chart name in a Helm chart repository.
	Chart string
	// Ref names the source for `$ref/...` value files of other sources.
	Ref string
	// Revision is the synced revision: a commit for git, a version for a
	// chart; empty when none is recorded yet.
	Revision string
}

// ApplicationSources reads an Application's sources and their revisions:
// spec.sources with the revisions list, index for index, or spec.source
// with the single revision; each from status.operationState.syncResult
// when it has one, else from status.sync (argo-cd types.go: SyncStatus
// Revisions and SyncOperationResult Revisions "in the same order as
// spec.sources").
func ApplicationSources(app map[string]any) ([]ApplicationSource, error) {
	multi, _, err := unstructured.NestedSlice(app, "spec", "sources")
	if err != nil {
		return nil, fmt.Errorf("spec.sources: %w", err)
	}
	if len(multi) == 0 {
		single, found, err := unstructured.NestedMap(app, "spec", "source")
		if err != nil || !found {
			return nil, fmt.Errorf("the Application has neither spec.source nor spec.sources")
		}
		source := applicationSource(single)
		source.Revision = syncedRevision(app)
		return []ApplicationSource{source}, nil
	}
	revisions, err := syncedRevisions(app)
	if err != nil {
		return nil, err
	}
	if len(revisions) > 0 && len(revisions) != len(multi) {
		return nil, fmt.Errorf("%d synced revisions for %d sources", len(revisions), len(multi))
	}
	sources := make([]ApplicationSource, 0, len(multi))
	for i, raw := range multi {
		fields, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.sources[%d] is not an object", i)
		}
		source := applicationSource(fields)
		if len(revisions) > 0 {
			source.Revision = revisions[i]
		}
		sources = append(sources, source)
	}
	return sources, nil
}

// applicationSource reads the fields of one source.
func applicationSource(fields map[string]any) ApplicationSource {
	str := func(name string) string {
		s, _ := fields[name].(string)
		return s
	}
	return ApplicationSource{RepoURL: str("repoURL"), Path: str("path"), Chart: str("chart"), Ref: str("ref")}
}

// syncedRevision is the single-source revision being synced, else synced.
func syncedRevision(app map[string]any) string {
	for _, path := range [][]string{{"status", "operationState", "syncResult", "revision"}, {"status", "sync", "revision"}} {
		if value, _, _ := unstructured.NestedString(app, path...); value != "" {
			return value
		}
	}
	return ""
}

// syncedRevisions is the multi-source revisions list being synced, else
// synced.
func syncedRevisions(app map[string]any) ([]string, error) {
	for _, path := range [][]string{{"status", "operationState", "syncResult", "revisions"}, {"status", "sync", "revisions"}} {
		values, found, err := unstructured.NestedStringSlice(app, path...)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", path, err)
		}
		if found && len(values) > 0 {
			return values, nil
		}
	}
	return nil, nil
}

// ManifestSource is the index of the source that renders the manifests:
// the only source that is not a bare `ref` for value files, else the first
// git directory among several; -1 when there is none.
func ManifestSource(sources []ApplicationSource) int {
	var rendering []int
	for i, s := range sources {
		if s.Ref != "" && s.Path == "" && s.Chart == "" {
			continue
		}
		rendering = append(rendering, i)
	}
	switch {
	case len(rendering) == 0:
		return -1
	case len(rendering) == 1:
		return rendering[0]
	}
	for _, i := range rendering {
		if sources[i].Chart == "" {
			return i
		}
	}
	return rendering[0]
}

// ArgoRenderInputs records an Application's render inputs: its source or
// sources and destination namespace as JSON, and the revision of every
// source of a multi-source Application.
func ArgoRenderInputs(app map[string]any, sources []ApplicationSource) (*embedopsv1.RenderInputs, error) {
	spec := map[string]any{}
	for _, field := range []string{"source", "sources"} {
		if value, found, _ := unstructured.NestedFieldNoCopy(app, "spec", field); found {
			spec[field] = value
		}
	}
	if namespace, _, _ := unstructured.NestedString(app, "spec", "destination", "namespace"); namespace != "" {
		spec["destination"] = map[string]any{"namespace": namespace}
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the Application's sources: %w", err)
	}
	render := &embedopsv1.RenderInputs{Spec: string(data)}
	if multi, _, _ := unstructured.NestedSlice(app, "spec", "sources"); len(multi) > 0 {
		for _, s := range sources {
			render.Revisions = append(render.Revisions, s.Revision)
		}
	}
	return render, nil
}
