package audit

import (
	"github.com/go-git/go-git/v5"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// argoRecipeFor is a placeholder until Argo CD sources are rendered.
func argoRecipeFor(_ *git.Repository, _ embedopsv1.DecisionSource) (recipe, string) {
	return plain{}, ""
}
