// Package v1alpha1 holds the embedops.dev/v1alpha1 API: EmbeddingServer, which
// users commit to git, and ModelCacheBinding, the controller's ledger of cache
// storage decisions.
//
// The package is pure: types, the condition vocabulary and the CEL rules that
// the API server enforces at admission. It imports no clients.
//
// +kubebuilder:object:generate=true
// +groupName=embedops.dev
package v1alpha1
