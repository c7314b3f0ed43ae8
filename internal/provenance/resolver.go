package provenance

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// ErrSourcePending means a GitOps tool is applying the object right now and
// has not recorded it yet: look again shortly rather than record Unknown.
var ErrSourcePending = errors.New("the GitOps tool has not finished applying this object")

// DefaultArgoCDNamespace is where Applications live when a tracking id
// names no namespace.
const DefaultArgoCDNamespace = "argocd"

// Resolver finds the source of an object's manifest. Flux and Argo CD
// objects are read as unstructured, so their CRDs are optional.
type Resolver struct {
	// Reader reads Kustomizations, GitRepositories and Applications.
	Reader client.Reader
	// ArgoCDNamespace is Argo CD's own namespace; empty means "argocd".
	ArgoCDNamespace string
	// Now stamps decidedAt; nil means metav1.Now.
	Now func() metav1.Time
}

// method is one way of finding a source; found is false when it does not
// apply to the object.
type method func(ctx context.Context, obj client.Object) (source embedopsv1.DecisionSource, found bool, err error)

// Resolve returns the source of obj: declared, Flux, Argo CD, else Unknown.
func (r *Resolver) Resolve(ctx context.Context, obj client.Object) (embedopsv1.DecisionSource, error) {
	for _, find := range []method{r.declared, r.flux, r.argoCD} {
		source, found, err := find(ctx, obj)
		if err != nil {
			return embedopsv1.DecisionSource{}, err
		}
		if found {
			source.DecidedAt = r.now()
			return source, nil
		}
	}
	return embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: r.now()}, nil
}

func (r *Resolver) now() metav1.Time {
	if r.Now != nil {
		return r.Now()
	}
	return metav1.Now()
}

// declared reads the embedops.dev/source-* annotations; a malformed
// revision is an error the user must fix, not a reason to guess.
func (r *Resolver) declared(_ context.Context, obj client.Object) (embedopsv1.DecisionSource, bool, error) {
	annotations := obj.GetAnnotations()
	raw, ok := annotations[embedopsv1.SourceRevisionAnnotation]
	if !ok {
		return embedopsv1.DecisionSource{}, false, nil
	}
	rev, err := ParseRevision(raw)
	if err != nil {
		return embedopsv1.DecisionSource{}, false, fmt.Errorf("annotation %s: %w", embedopsv1.SourceRevisionAnnotation, err)
	}
	return embedopsv1.DecisionSource{
		Method:     embedopsv1.SourceDeclared,
		Revision:   raw,
		Commit:     rev.Commit(),
		Repository: annotations[embedopsv1.SourceRepositoryAnnotation],
		Path:       annotations[embedopsv1.SourcePathAnnotation],
	}, true, nil
}

// getOptional reads an object of a kind that may not be installed; found is
// false when the object or its CRD does not exist.
func (r *Resolver) getOptional(ctx context.Context, gvk schema.GroupVersionKind, key types.NamespacedName) (*unstructured.Unstructured, bool, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err := r.Reader.Get(ctx, key, obj)
	switch {
	case err == nil:
		return obj, true, nil
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("reading %s %s: %w", gvk.Kind, key, err)
	}
}

// objectRef points a source at the GitOps object it came from.
func objectRef(obj *unstructured.Unstructured) *embedopsv1.SourceObjectReference {
	return &embedopsv1.SourceObjectReference{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
	}
}
