package builder

import (
	"maps"
	"slices"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Recommended Kubernetes labels set on every child.
const (
	// AppNameLabel names the application a child belongs to.
	AppNameLabel = "app.kubernetes.io/name"
	// AppInstanceLabel names the instance, the EmbeddingServer.
	AppInstanceLabel = "app.kubernetes.io/instance"
	// ManagedByLabel names the tool that manages a child.
	ManagedByLabel = "app.kubernetes.io/managed-by"

	// AppName is the value of AppNameLabel.
	AppName = "text-embeddings-inference"
	// ManagedBy is the value of ManagedByLabel.
	ManagedBy = "embedops"
)

// SelectorLabels returns the labels that select a server's pods: the
// StatefulSet selector and the Services' selectors. They never change for a
// server, because a StatefulSet's selector is immutable.
func SelectorLabels(server *embedopsv1.EmbeddingServer) map[string]string {
	return map[string]string{
		AppNameLabel:     AppName,
		AppInstanceLabel: server.Name,
		ManagedByLabel:   ManagedBy,
	}
}

// Labels returns the labels of every child and of the pod template: the
// selector labels plus the owner labels embedopsv1.NameLabel and
// embedopsv1.NamespaceLabel.
func Labels(server *embedopsv1.EmbeddingServer) map[string]string {
	labels := SelectorLabels(server)
	labels[embedopsv1.NameLabel] = server.Name
	labels[embedopsv1.NamespaceLabel] = server.Namespace
	return labels
}

// sortedKeys returns the keys of m in order, for stable messages.
func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
