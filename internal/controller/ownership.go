package controller

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// OwnershipConflictError says that a child's name is taken by an object
// embedops does not own for this server. Such an object is never adopted or
// changed.
type OwnershipConflictError struct {
	// Kind, Namespace and Name identify the conflicting object.
	Kind, Namespace, Name string
	// Why says what makes it someone else's.
	Why string
}

// Error names the object and why it is not ours.
func (e *OwnershipConflictError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not owned by this EmbeddingServer: %s", e.Kind, e.Namespace, e.Name, e.Why)
}

// IsOwnershipConflict reports whether err, or an error it wraps, is an
// OwnershipConflictError.
func IsOwnershipConflict(err error) bool {
	var conflict *OwnershipConflictError
	return errors.As(err, &conflict)
}

// ownershipConflict returns why an existing object is not the server's child,
// or "" when it is: it must carry the owner labels of this server and have no
// controller other than an EmbeddingServer of the same name (a controller
// with another UID is a deleted server of that name whose child outlived it).
func ownershipConflict(server *embedopsv1.EmbeddingServer, existing metav1.Object) string {
	labels := existing.GetLabels()
	if labels[embedopsv1.NameLabel] != server.Name || labels[embedopsv1.NamespaceLabel] != server.Namespace {
		return fmt.Sprintf("it lacks the labels %s=%s and %s=%s", embedopsv1.NameLabel, server.Name, embedopsv1.NamespaceLabel, server.Namespace)
	}
	controller := metav1.GetControllerOfNoCopy(existing)
	if controller == nil {
		return ""
	}
	group := schema.FromAPIVersionAndKind(controller.APIVersion, controller.Kind).Group
	if group != embedopsv1.GroupVersion.Group || controller.Kind != embedopsv1.EmbeddingServerKind || controller.Name != server.Name {
		return fmt.Sprintf("it is controlled by %s %s", controller.Kind, controller.Name)
	}
	return ""
}
