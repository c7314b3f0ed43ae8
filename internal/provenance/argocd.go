package provenance

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// InstanceLabel is the label Argo CD's label tracking sets to the
// Application's name (argo-cd common/common.go LabelKeyAppInstance).
const InstanceLabel = "app.kubernetes.io/instance"

var applicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// argoCD finds the Application that synced obj and records the source that
// rendered it at the revision of its current operation, else the one it
// last synced. The Application must list obj in status.resources (or be
// syncing), whichever key names it: the tracking id and the instance label
// are both written by whoever edits the object.
func (r *Resolver) argoCD(ctx context.Context, obj client.Object) (Resolution, bool, error) {
	key, byLabel, ok := r.trackingApplication(obj)
	if !ok {
		return Resolution{}, false, nil
	}
	app, found, err := r.getOptional(ctx, applicationGVK, key)
	if err != nil {
		return Resolution{}, false, err
	}
	if !found {
		if byLabel {
			// The instance label is also Helm's convention: it proves nothing.
			return Resolution{}, false, nil
		}
		return notFound("Application", key), false, nil
	}
	if !listsResource(app, obj) && (byLabel || hasSynced(app)) {
		// Anyone who can edit the server can write either key; only the
		// Application's own record of what it manages says it synced it.
		// One that never synced is recorded as pending (argoResolution).
		return Resolution{}, false, nil
	}
	res, err := argoResolution(app)
	return res, err == nil, err
}

// trackingApplication names the Application tracking obj. Annotation and
// annotation+label tracking write the tracking id annotation, which names
// the object itself; label tracking writes only the instance label (argo-cd
// util/argo/resource_tracking.go, SetAppInstance).
func (r *Resolver) trackingApplication(obj client.Object) (key types.NamespacedName, byLabel, ok bool) {
	if raw, found := obj.GetAnnotations()[TrackingIDAnnotation]; found {
		id, err := ParseTrackingID(raw)
		if err != nil || !tracks(id, obj) {
			// A foreign or copied annotation says nothing about this object.
			return types.NamespacedName{}, false, false
		}
		return types.NamespacedName{Namespace: r.argoNamespace(id.AppNamespace), Name: id.AppName}, false, true
	}
	instance := obj.GetLabels()[InstanceLabel]
	if instance == "" {
		return types.NamespacedName{}, false, false
	}
	// Applications in any namespace are named <namespace>_<name>.
	namespace, name, found := strings.Cut(instance, "_")
	if !found {
		namespace, name = "", instance
	}
	if name == "" {
		return types.NamespacedName{}, false, false
	}
	return types.NamespacedName{Namespace: r.argoNamespace(namespace), Name: name}, true, true
}

func (r *Resolver) argoNamespace(appNamespace string) string {
	switch {
	case appNamespace != "":
		return appNamespace
	case r.ArgoCDNamespace != "":
		return r.ArgoCDNamespace
	default:
		return DefaultArgoCDNamespace
	}
}

// tracks reports whether the tracking id names obj itself.
func tracks(id TrackingID, obj client.Object) bool {
	return id.Group == embedopsv1.GroupVersion.Group && id.Kind == embedopsv1.EmbeddingServerKind &&
		id.Namespace == obj.GetNamespace() && id.Name == obj.GetName()
}

// listsResource reports whether the Application's status.resources lists
// obj, or an operation is running (the first sync lists it only after).
func listsResource(app *unstructured.Unstructured, obj client.Object) bool {
	if phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase"); phase == "Running" {
		return true
	}
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, resource := range resources {
		fields, ok := resource.(map[string]any)
		if ok && fields["group"] == embedopsv1.GroupVersion.Group && fields["kind"] == embedopsv1.EmbeddingServerKind &&
			fields["namespace"] == obj.GetNamespace() && fields["name"] == obj.GetName() {
			return true
		}
	}
	return false
}

// hasSynced reports whether the Application has run or recorded a sync.
func hasSynced(app *unstructured.Unstructured) bool {
	_, operation, _ := unstructured.NestedMap(app.Object, "status", "operationState")
	_, synced, _ := unstructured.NestedMap(app.Object, "status", "sync")
	return operation || synced
}

// argoResolution records the Application's manifest source at its synced
// revision, with the render inputs.
func argoResolution(app *unstructured.Unstructured) (Resolution, error) {
	where := fmt.Sprintf("Application %s/%s", app.GetNamespace(), app.GetName())
	sources, err := ApplicationSources(app.Object)
	if err != nil {
		return Resolution{Source: embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, ObjectRef: objectRef(app)},
			Reason: embedopsv1.InvalidRevisionReason, Message: fmt.Sprintf("%s: %v", where, err)}, nil
	}
	render, err := ArgoRenderInputs(app.Object, sources)
	if err != nil {
		return Resolution{}, err
	}
	index := ManifestSource(sources)
	if index < 0 {
		return Resolution{Source: embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, ObjectRef: objectRef(app)},
			Reason: embedopsv1.SourceNotFoundReason, Message: where + " has no source that renders manifests"}, nil
	}
	chosen := sources[index]
	source := embedopsv1.DecisionSource{
		Method: embedopsv1.SourceArgoCD, Repository: chosen.RepoURL, Path: chosen.Path, Chart: chosen.Chart,
		ObjectRef: objectRef(app), Render: render,
	}
	switch {
	case chosen.Revision == "":
		source.Method = embedopsv1.SourceUnknown
		return Resolution{Source: source, Reason: embedopsv1.SourcePendingReason, Message: where + " has not synced a revision yet"}, nil
	case chosen.Chart != "":
		source.Revision = chosen.Revision
		return Resolution{Source: source, Reason: embedopsv1.NotGitSourceReason,
			Message: fmt.Sprintf("%s renders chart %s %s from %s, not a git source", where, chosen.Chart, chosen.Revision, chosen.RepoURL)}, nil
	case strings.HasPrefix(strings.ToLower(chosen.RepoURL), "oci://"):
		// Argo CD's OCI sources: the revision is the artifact's digest or
		// tag, which names no commit.
		source.Revision = chosen.Revision
		return Resolution{Source: source, Reason: embedopsv1.NotGitSourceReason,
			Message: fmt.Sprintf("%s renders OCI artifact %s %s, not a git source", where, chosen.RepoURL, chosen.Revision)}, nil
	}
	return withRevision(source, chosen.Revision, where), nil
}
