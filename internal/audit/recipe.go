package audit

import (
	"github.com/go-git/go-git/v5"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

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
