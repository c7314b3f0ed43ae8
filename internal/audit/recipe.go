package audit

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// ErrPathNotFound is wrapped by Render's error when the commit has no
// directory at the source's path.
var ErrPathNotFound = errors.New("no such directory")

// recipeFor is how a binding's source is rendered: as the Flux
// Kustomization or Argo CD Application it records the settings of, else
// plainly. reason says why it cannot be rendered faithfully.
func recipeFor(repo *git.Repository, source embedopsv1.DecisionSource) (recipe, string) {
	render := source.Render
	if render == nil || source.ObjectRef == nil {
		return plain{}, ""
	}
	switch source.ObjectRef.Kind {
	case "Kustomization":
		return fluxRecipeFor(render)
	case "Application":
		return argoRecipeFor(repo, source)
	}
	return plain{}, ""
}

// Render renders a source at a commit of repo as the GitOps tool it
// records renders it, for previewing a decision. It returns the objects as
// a YAML stream and the namespace the tool applies objects that name none
// in ("" when it sets none). What the audit would call Unverifiable is an
// error here; a path the commit does not have is one wrapping
// ErrPathNotFound.
func Render(repo *git.Repository, commit string, source embedopsv1.DecisionSource) ([]byte, string, error) {
	if source.Chart != "" {
		return nil, "", fmt.Errorf("not a git source: chart %s from %s", source.Chart, source.Repository)
	}
	if !cleanPath(source.Path) {
		return nil, "", fmt.Errorf("path %q leaves the repository", source.Path)
	}
	rc, reason := recipeFor(repo, source)
	if reason != "" {
		return nil, "", errors.New(reason)
	}
	inputs, err := gitInputs(source)
	switch {
	case err != nil:
		return nil, "", err
	case len(inputs.Include) > 0:
		return nil, "", errors.New("the GitRepository includes other repositories, which a preview does not lay out")
	}
	at, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return nil, "", fmt.Errorf("commit %s: %w", commit, err)
	}
	root, err := at.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("reading the tree of %s: %w", commit, err)
	}
	if _, err := root.FindEntry(".gitmodules"); err == nil && inputs.RecurseSubmodules {
		return nil, "", errSubmodules
	}
	namespace := ""
	if applied, ok := rc.(interface{ namespace() string }); ok {
		namespace = applied.namespace()
	}
	built := newRenderer(newObjects(repo.Storer)).render(root, renderDir(source.Path), rc)
	if errors.Is(built.err, errPathNotFound) {
		return nil, "", fmt.Errorf("path %q does not exist at %s: %w", source.Path, commit, ErrPathNotFound)
	}
	return built.resources, namespace, built.err
}
