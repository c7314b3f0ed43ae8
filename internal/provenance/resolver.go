package provenance

import (
	"context"
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

// DefaultArgoCDNamespace is where Applications live when a tracking id
// names no namespace.
const DefaultArgoCDNamespace = "argocd"

// Resolver finds the source of an object's manifest. Flux and Argo CD
// objects are read as unstructured, so their CRDs are optional.
type Resolver struct {
	// Reader reads Kustomizations, GitRepositories, Applications, and the
	// metadata of substitution ConfigMaps and Secrets.
	Reader client.Reader
	// ArgoCDNamespace is Argo CD's own namespace; empty means "argocd".
	ArgoCDNamespace string
	// Now stamps decidedAt; nil means metav1.Now.
	Now func() metav1.Time
}

// Resolution is what is known of an object's source. Provenance never
// blocks serving: whatever goes wrong short of a failing API call, the
// best-known source is returned (method Unknown when nothing is known) and
// Reason says what is missing.
type Resolution struct {
	// Source is the best-known source, ready to record.
	Source embedopsv1.DecisionSource
	// Reason is empty when the source is fully resolved to a git commit,
	// else one of the api/ reasons of the SourceResolved condition.
	Reason string
	// Message says what is missing, for the condition and the event.
	Message string
	// Disagreement is set when the server declares a source revision
	// (embedopsv1.SourceRevisionAnnotation) other than the one the GitOps
	// tool applied: the tool's is recorded, and this says so, for a
	// Warning event.
	Disagreement string
}

// method is one way of finding a source. found is true when it settles the
// source; a resolution with a Reason and found false is a problem noted on
// the way, reported if no later method finds the source. err is a failing
// API call only.
type method func(ctx context.Context, obj client.Object) (res Resolution, found bool, err error)

// Resolve returns what is known of obj's source: Flux's or Argo CD's record
// when it names a git commit, else the declared annotations, else what the
// tools noted, else Unknown. The tool's record wins over a declared
// revision: it is what was applied, and a hard-coded annotation goes stale
// (Disagreement says when they differ). The error is a failing API call,
// worth retrying; anything else is a Resolution with a Reason.
func (r *Resolver) Resolve(ctx context.Context, obj client.Object) (Resolution, error) {
	declared, hasDeclared := declaredSource(obj)
	var noted *Resolution
	for _, find := range []method{r.flux, r.argoCD} {
		res, found, err := find(ctx, obj)
		if err != nil {
			return Resolution{}, err
		}
		if found && (res.Source.Commit != "" || !hasDeclared) {
			if hasDeclared {
				res.Disagreement = disagreement(declared, res)
			}
			return r.finish(res), nil
		}
		if res.Reason != "" && noted == nil {
			noted = &res
		}
	}
	if hasDeclared {
		return r.finish(declared), nil
	}
	if noted != nil {
		return r.finish(*noted), nil
	}
	return r.finish(Resolution{
		Source: embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown},
		Reason: embedopsv1.SourceUnknownReason,
		Message: fmt.Sprintf("no source found: annotate the server with %s or apply it with Flux or Argo CD",
			embedopsv1.SourceRevisionAnnotation),
	}), nil
}

// disagreement says how the declared revision differs from the tool's
// record, or "" when it names the same commit.
func disagreement(declared, tool Resolution) string {
	if declared.Source.Commit != "" && declared.Source.Commit == tool.Source.Commit {
		return ""
	}
	return fmt.Sprintf("annotation %s says %q but %s applied %s: the applied revision is recorded",
		embedopsv1.SourceRevisionAnnotation, declared.Source.Revision, tool.Source.Method, tool.Source.Revision)
}

// finish stamps the decision time and keeps the source recordable: a
// method other than Unknown must name a revision.
func (r *Resolver) finish(res Resolution) Resolution {
	if res.Source.Method != embedopsv1.SourceUnknown && res.Source.Revision == "" {
		res.Source.Method = embedopsv1.SourceUnknown
	}
	if res.Source.Method == "" {
		res.Source.Method = embedopsv1.SourceUnknown
	}
	if render := res.Source.Render; render != nil && len(render.Spec) > embedopsv1.MaxRenderSpecLength {
		render.Spec = ""
		if res.Reason == "" {
			res.Reason = embedopsv1.RenderInputsTooLargeReason
			res.Message = fmt.Sprintf("the render settings exceed %d bytes and are not recorded", embedopsv1.MaxRenderSpecLength)
		}
	}
	if render := res.Source.Render; render != nil && len(render.Source) > embedopsv1.MaxRenderSourceLength {
		render.Source = ""
		if res.Reason == "" {
			res.Reason = embedopsv1.RenderInputsTooLargeReason
			res.Message = fmt.Sprintf("the GitRepository's includes exceed %d bytes and are not recorded", embedopsv1.MaxRenderSourceLength)
		}
	}
	res.Source.DecidedAt = r.now()
	return res
}

func (r *Resolver) now() metav1.Time {
	if r.Now != nil {
		return r.Now()
	}
	return metav1.Now()
}

// declaredSource reads the embedops.dev/source-* annotations; a malformed
// revision is recorded as written, with no commit, and reported.
func declaredSource(obj client.Object) (Resolution, bool) {
	annotations := obj.GetAnnotations()
	raw, ok := annotations[embedopsv1.SourceRevisionAnnotation]
	if !ok {
		return Resolution{}, false
	}
	source := embedopsv1.DecisionSource{
		Method:     embedopsv1.SourceDeclared,
		Revision:   raw,
		Repository: annotations[embedopsv1.SourceRepositoryAnnotation],
		Path:       annotations[embedopsv1.SourcePathAnnotation],
	}
	return withRevision(source, raw, "annotation "+embedopsv1.SourceRevisionAnnotation), true
}

// withRevision parses revision into the source's commit; an unparsable one
// is kept as written and reported as InvalidRevision.
func withRevision(source embedopsv1.DecisionSource, revision, where string) Resolution {
	source.Revision = revision
	rev, err := ParseRevision(revision)
	if err != nil {
		return Resolution{Source: source, Reason: embedopsv1.InvalidRevisionReason, Message: fmt.Sprintf("%s: %v", where, err)}
	}
	source.Commit = rev.Commit()
	if source.Commit == "" {
		return Resolution{Source: source, Reason: embedopsv1.NotGitSourceReason,
			Message: fmt.Sprintf("%s: revision %s names an artifact digest, not a git commit", where, revision)}
	}
	return Resolution{Source: source}
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

// notFound notes that obj names a GitOps object that is not there.
func notFound(kind string, key types.NamespacedName) Resolution {
	return Resolution{
		Source:  embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown},
		Reason:  embedopsv1.SourceNotFoundReason,
		Message: fmt.Sprintf("the server names %s %s, which does not exist or whose kind is not installed", kind, key),
	}
}

// objectRef points a source at the GitOps object it came from.
func objectRef(obj *unstructured.Unstructured) *embedopsv1.SourceObjectReference {
	return &embedopsv1.SourceObjectReference{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
	}
}
