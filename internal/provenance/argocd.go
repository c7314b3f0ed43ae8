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

var applicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// argoCD follows the tracking id to the Application and takes the revision
// of its current operation, else the one it last synced.
func (r *Resolver) argoCD(ctx context.Context, obj client.Object) (embedopsv1.DecisionSource, bool, error) {
	raw, ok := obj.GetAnnotations()[TrackingIDAnnotation]
	if !ok {
		return embedopsv1.DecisionSource{}, false, nil
	}
	id, err := ParseTrackingID(raw)
	if err != nil || !tracks(id, obj) {
		// A foreign or copied annotation says nothing about this object.
		return embedopsv1.DecisionSource{}, false, nil
	}
	app, found, err := r.getOptional(ctx, applicationGVK, types.NamespacedName{Namespace: r.argoNamespace(id), Name: id.AppName})
	if err != nil || !found {
		return embedopsv1.DecisionSource{}, false, err
	}
	revision := firstString(app, []string{"status", "operationState", "syncResult", "revision"}, []string{"status", "sync", "revision"})
	if revision == "" {
		return embedopsv1.DecisionSource{}, false, fmt.Errorf("application %s/%s has no synced revision: %w", app.GetNamespace(), app.GetName(), ErrSourcePending)
	}
	rev, err := ParseRevision(revision)
	if err != nil {
		return embedopsv1.DecisionSource{}, false, fmt.Errorf("application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
	}
	return embedopsv1.DecisionSource{
		Method: embedopsv1.SourceArgoCD, Revision: revision, Commit: rev.Commit(),
		Repository: firstString(app, []string{"spec", "source", "repoURL"}),
		Path:       firstString(app, []string{"spec", "source", "path"}),
		ObjectRef:  objectRef(app),
	}, true, nil
}

func (r *Resolver) argoNamespace(id TrackingID) string {
	switch {
	case id.AppNamespace != "":
		return id.AppNamespace
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

// firstString returns the first non-empty string at one of the paths.
func firstString(obj *unstructured.Unstructured, paths ...[]string) string {
	for _, path := range paths {
		if value, _, _ := unstructured.NestedString(obj.Object, path...); value != "" {
			return value
		}
	}
	return ""
}
