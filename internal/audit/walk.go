package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// walk evaluates one binding's decision at commits of one repository.
type walk struct {
	renderer  *renderer
	recipe    recipe
	binding   *embedopsv1.ModelCacheBinding
	layout    *layout
	dir       string
	namespace string
	// rendersBefore is the renderer's count when the walk began.
	rendersBefore int
	// seen are the evaluations of builds already evaluated.
	seen map[*rendering]evaluation
}

// evaluation is the binding's server and decision in one build.
type evaluation struct {
	match
	err error
}

// walk starts evaluating a binding in a repository with a recipe, each
// commit laid out as its artifact when lay is set (with a renderer of its
// own, over the included repositories too).
func (a *auditor) walk(repo *git.Repository, binding *embedopsv1.ModelCacheBinding, rc recipe, lay *layout) *walk {
	r, ok := a.renderers[repo]
	switch {
	case lay != nil:
		r = newRenderer(newObjects(lay.storer))
	case !ok:
		r = newRenderer(newObjects(repo.Storer))
		a.renderers[repo] = r
	}
	return &walk{
		renderer:      r,
		recipe:        rc,
		binding:       binding,
		layout:        lay,
		dir:           renderDir(binding.Spec.Source.Path),
		namespace:     defaultNamespace(binding, rc),
		rendersBefore: r.renders,
		seen:          map[*rendering]evaluation{},
	}
}

// defaultNamespace is the namespace of rendered servers that name none:
// the one the GitOps tool applies them in, else the binding's, which is its
// servers'.
func defaultNamespace(binding *embedopsv1.ModelCacheBinding, rc recipe) string {
	if applied, ok := rc.(interface{ namespace() string }); ok && applied.namespace() != "" {
		return applied.namespace()
	}
	if binding.Namespace != "" {
		return binding.Namespace
	}
	namespace, _, _ := strings.Cut(binding.Spec.Identity.SharingDomain, "/")
	return namespace
}

// renders is how many builds the walk ran.
func (w *walk) renders() int {
	return w.renderer.renders - w.rendersBefore
}

// evaluate renders the binding's path at a commit and decides its server.
func (w *walk) evaluate(commit *object.Commit) evaluation {
	root, err := object.GetTree(w.renderer.objects.storer, commit.TreeHash)
	if err != nil {
		return evaluation{err: fmt.Errorf("%w: reading the tree of commit %s: %w", errRepository, commit.Hash, err)}
	}
	if w.layout != nil {
		if root, err = w.layout.apply(root); err != nil {
			return evaluation{err: err}
		}
	}
	built := w.renderer.render(root, w.dir, w.recipe)
	if ev, ok := w.seen[built]; ok {
		return ev
	}
	ev := evaluation{}
	if built.err == nil {
		var servers []*embedopsv1.EmbeddingServer
		servers, ev.err = decision.ServersFromYAML(built.resources, w.namespace)
		if ev.err == nil {
			ev.match, ev.err = matchServer(servers, w.binding)
		}
	} else {
		ev.err = built.err
	}
	w.seen[built] = ev
	return ev
}

// reason explains an evaluation that failed at a commit.
func (w *walk) reason(ev evaluation, commit *object.Commit) string {
	at := fmt.Sprintf("at commit %s", commit.Hash)
	switch {
	case errors.Is(ev.err, errPathNotFound):
		return fmt.Sprintf("path %q does not exist %s", w.binding.Spec.Source.Path, at)
	case errors.Is(ev.err, errNoServer):
		return fmt.Sprintf("%v in path %q %s", ev.err, w.binding.Spec.Source.Path, at)
	default:
		return fmt.Sprintf("rendering path %q %s: %v", w.binding.Spec.Source.Path, at, ev.err)
	}
}

// search is the outcome of an origin search.
type search struct {
	// origin is the oldest commit of the run that renders the recorded
	// digest.
	origin *object.Commit
	// storageOrigin is the oldest commit of the run whose decisions share
	// the recorded one's storage (walk.sameStorage).
	storageOrigin *object.Commit
	// walked counts the commits evaluated, the recorded one included.
	walked int
	// shallow is set when the digest's run reached the end of a shallow
	// history, so the decision may be older than origin.
	shallow bool
}

// origin walks first-parent history back from the recorded commit while the
// binding's server renders decisions that share the storage of the recorded
// decision at; the digest's run is the start of it. A build failure or a missing
// server ends the run; failing to read the repository is an error.
func (w *walk) origin(ctx context.Context, recorded *object.Commit, at *decision.Decision, progress func(done, total int)) (search, error) {
	found := search{origin: recorded, storageOrigin: recorded, walked: 1}
	history, shallow, err := firstParents(ctx, w.renderer.objects, recorded)
	if err != nil {
		return found, err
	}
	report := func(done int) {
		if progress != nil {
			progress(done, len(history))
		}
	}
	report(0)
	digestRun, newer := true, at
	for i, commit := range history {
		if err := ctx.Err(); err != nil {
			return found, err
		}
		ev := w.evaluate(commit)
		found.walked++
		report(i + 1)
		if errors.Is(ev.err, errRepository) {
			return found, ev.err
		}
		if ev.err != nil || ev.decision == nil || !w.sameStorage(ev.decision, newer) {
			report(len(history))
			return found, nil
		}
		newer = ev.decision
		found.storageOrigin = commit
		digestRun = digestRun && ev.decision.Decision.Digest == at.Decision.Digest
		if digestRun {
			found.origin = commit
		}
	}
	report(len(history))
	found.shallow = shallow && digestRun
	return found, nil
}

// sameStorage reports whether the decision older, rendered at a commit,
// shares the storage of newer, rendered at its child: the same storage part
// (decision.SuccessionOf, a change of retainFor alone), or a growth or a
// revision the controller hands over to a successor in place. Whether it
// did depends on cluster facts (the class's expansion, the room and
// replicas for a second revision) the audit has not: the binding records
// the outcome instead. Such a step is crossed only when the binding took
// its storage over (its storage name is another binding's), and not from
// the decision of the binding the storage is named after, which had
// storage of its own.
func (w *walk) sameStorage(older, newer *decision.Decision) bool {
	switch decision.SuccessionOf(older, newer) {
	case decision.RetainForSuccession:
		return true
	case decision.NoSuccession:
		return false
	}
	storage := decision.StorageName(w.binding)
	return storage != w.binding.Name && decision.BindingSuffix(decision.BindingName(newer), storage) == 0
}

// firstParents lists a commit's first-parent ancestors, newest first,
// ending at a root commit or, reported as shallow, where a shallow clone has
// cut history.
func firstParents(ctx context.Context, objs *objects, commit *object.Commit) ([]*object.Commit, bool, error) {
	var history []*object.Commit
	for len(commit.ParentHashes) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		parent, err := object.GetCommit(objs.storer, commit.ParentHashes[0])
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return history, true, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%w: reading commit %s: %w", errRepository, commit.ParentHashes[0], err)
		}
		history = append(history, parent)
		commit = parent
	}
	return history, false, nil
}
