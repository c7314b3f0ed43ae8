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

// TrackingKeys are the labels and annotations by which a GitOps tool
// takes an object as its own: Argo CD's label tracking key (by default
// app.kubernetes.io/instance; argocd.argoproj.io/instance is the key its
// docs suggest instead) and annotation tracking id (argo-cd
// util/argo/resource_tracking.go), and the labels Flux's
// kustomize-controller and helm-controller set on what they apply. Objects
// the controller creates without an owner reference carry none of them.
var TrackingKeys = []string{
	AppInstanceLabel,
	"argocd.argoproj.io/instance",
	"argocd.argoproj.io/tracking-id",
	"kustomize.toolkit.fluxcd.io/name",
	"kustomize.toolkit.fluxcd.io/namespace",
	"helm.toolkit.fluxcd.io/name",
	"helm.toolkit.fluxcd.io/namespace",
}

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

// StatefulSetSelectorLabels returns the selector of a StatefulSet made now:
// the server's pods by embedopsv1.NameLabel instead of
// app.kubernetes.io/instance. The StatefulSet controller copies its
// selector's matchLabels onto every claim it makes from a claim template
// (kubernetes v1.37.2 pkg/controller/statefulset/stateful_set_utils.go,
// getPersistentVolumeClaims), and app.kubernetes.io/instance on a claim
// without an owner is what Argo CD's label tracking takes as the
// Application's own and prunes (TrackingKeys). A StatefulSet made by an
// older release keeps its selector, which is immutable (keepLiveSelector).
func StatefulSetSelectorLabels(server *embedopsv1.EmbeddingServer) map[string]string {
	return map[string]string{
		AppNameLabel:         AppName,
		ManagedByLabel:       ManagedBy,
		embedopsv1.NameLabel: server.Name,
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
