package controller

import (
	"cmp"
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// A StatefulSet whose claim templates change is replaced: deleted, and
// created again only once the pods it made are gone. Created at once, the
// new StatefulSet would ask for pods whose names the old ones still hold;
// kube-controller-manager's StatefulSet controller then backs off
// ("pods already exists", pkg/controller/statefulset/stateful_set.go), and
// since the old pods' deletion is not an event of the new StatefulSet, it
// may wait minutes before it tries again.

// replaceStatefulSet deletes the server's StatefulSet, with the UID it has
// now, so the next reconciles create it anew once its pods are gone. The
// remaining phases are held: the old binding stays in use meanwhile.
func (r *EmbeddingServerReconciler) replaceStatefulSet(ctx context.Context, scope *serverScope) error {
	server := scope.server
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
	if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: server.Namespace, Name: cmp.Or(scope.statefulSetName, server.Name)}, existing); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("reading the StatefulSet to replace: %w", err))
	}
	uid := existing.UID
	if err := r.act.Delete(ctx, existing, uid); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the StatefulSet to replace it: %w", err)
	}
	r.rollouts.replaced(server.UID, uid)
	ctrl.LoggerFrom(ctx).Info("replacing the StatefulSet to change immutable fields", "statefulSet", existing.Name)
	r.holdForReplacement(scope, fmt.Sprintf("replacing StatefulSet %s to change its claim templates", existing.Name))
	return nil
}

// waitForReplacedPods holds the server while pods of a StatefulSet it
// replaced still exist: pods named as the desired StatefulSet's, owned by
// a StatefulSet other than the one that exists (and not yet seen gone).
// Pods of the old StatefulSets of a storage change (planStorageRollout)
// have other names, serve meanwhile and do not hold it.
func (r *EmbeddingServerReconciler) waitForReplacedPods(scope *serverScope) bool {
	server := scope.server
	name := cmp.Or(scope.statefulSetName, server.Name)
	current := types.UID("")
	if statefulSet := scope.observed.statefulSet(name); statefulSet != nil && !r.rollouts.isReplaced(server.UID, statefulSet.UID) {
		current = statefulSet.UID
	}
	pods := scope.observed.pods
	left := 0
	for i := range pods {
		owner := metav1.GetControllerOfNoCopy(&pods[i])
		if owner != nil && owner.Kind == "StatefulSet" && owner.Name == name && owner.UID != current {
			left++
		}
	}
	if left == 0 {
		return false
	}
	r.holdForReplacement(scope, fmt.Sprintf("waiting for %d pods of the replaced StatefulSet to go", left))
	return true
}

// holdForReplacement reports a StatefulSet being replaced on Ready and
// stops the remaining phases.
func (r *EmbeddingServerReconciler) holdForReplacement(scope *serverScope, message string) {
	conditions.MarkFalse(scope.server, embedopsv1.ReadyCondition, embedopsv1.InitializingReason, "%s", message)
	scope.halted = true
}
