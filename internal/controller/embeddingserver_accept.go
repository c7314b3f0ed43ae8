package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// reconcileAccepted checks that the spec's references resolve: a token Secret
// that is missing, or lacks its key, stalls the server before any child is
// applied, because its pods could only fail. Secrets are not watched (they
// are not cached at all), so the stalled server polls for the Secret every
// progress interval, as kustomize-controller polls for a dependency
// (its --requeue-dependency, 30s by default).
func (r *EmbeddingServerReconciler) reconcileAccepted(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if ref := server.Spec.Model.TokenSecretRef; ref != nil {
		problem, err := r.tokenProblem(ctx, server.Namespace, ref)
		if err != nil {
			return ctrl.Result{}, err
		}
		if problem != "" {
			conditions.MarkFalse(server, embedopsv1.AcceptedCondition, embedopsv1.SecretNotFoundReason, "%s", problem)
			r.stallAndPoll(scope, embedopsv1.SecretNotFoundReason, errors.New(problem))
			return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
		}
	}
	conditions.MarkTrue(server, embedopsv1.AcceptedCondition, embedopsv1.ValidReason, "the spec is valid and its references resolve")
	return ctrl.Result{}, nil
}

// tokenProblem says what is wrong with the token Secret, or "" when it has the
// key. The Secret is read with an uncached Get, so no Secret data is ever
// cached, and only the key's presence is looked at.
func (r *EmbeddingServerReconciler) tokenProblem(ctx context.Context, namespace string, ref *embedopsv1.SecretKeyRef) (string, error) {
	secret := &corev1.Secret{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("token Secret %s/%s does not exist", namespace, ref.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading token Secret %s/%s: %w", namespace, ref.Name, err)
	}
	if _, ok := secret.Data[ref.Key]; !ok {
		return fmt.Sprintf("token Secret %s/%s has no key %q", namespace, ref.Name, ref.Key), nil
	}
	return "", nil
}
