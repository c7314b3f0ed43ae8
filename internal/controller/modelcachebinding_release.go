package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// statefulSetMakingClaims names a StatefulSet whose claim templates would
// create one of the binding's claims: a server deleted during its first
// reconcile may leave one for a moment, and the StatefulSet controller could
// create a claim after the binding released the others. Read uncached, so a
// deletion is seen as it is; empty when there is none.
func (r *ModelCacheBindingReconciler) statefulSetMakingClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (string, error) {
	var statefulSets appsv1.StatefulSetList
	if err := r.apiReader.List(ctx, &statefulSets, client.InNamespace(binding.Namespace),
		client.MatchingLabelsSelector{Selector: ownedSelector()}); err != nil {
		return "", fmt.Errorf("listing StatefulSets: %w", err)
	}
	for _, sts := range statefulSets.Items {
		for _, template := range sts.Spec.VolumeClaimTemplates {
			prefix := template.Name + "-" + sts.Name + "-"
			if slices.ContainsFunc(binding.Spec.Resources.PersistentVolumeClaimNames, func(claim string) bool {
				return strings.HasPrefix(claim, prefix)
			}) {
				return sts.Name, nil
			}
		}
	}
	return "", nil
}
