package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/test/harness"
)

// The Flux kinds the test creates, read as unstructured: embedops' module
// does not depend on Flux's APIs.
var (
	gitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

// Flux settings of the test.
const (
	// branch is the branch Flux follows.
	branch = "main"
	// sourceInterval is how often source-controller looks for new commits.
	sourceInterval = "5s"
	// kustomizationTimeout bounds the Kustomization's apply and health checks.
	kustomizationTimeout = 3 * time.Minute
	// serversPath is the Kustomization's path in the repository.
	serversPath = "./servers"
)

// newGitRepository follows branch of the repository at url.
func newGitRepository(namespace, name, url string) *unstructured.Unstructured {
	repo := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"interval": sourceInterval,
			"timeout":  "60s",
			"url":      url,
			"ref":      map[string]any{"branch": branch},
		},
	}}
	repo.SetGroupVersionKind(gitRepositoryGVK)
	repo.SetNamespace(namespace)
	repo.SetName(name)
	return repo
}

// newKustomization applies serversPath of the GitRepository source into
// its own namespace, waiting for health with the given healthCheckExprs
// and pruning what leaves git.
func newKustomization(namespace, name, source string, healthCheckExprs []any) *unstructured.Unstructured {
	ks := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"interval":         "10m",
			"retryInterval":    "10s",
			"timeout":          kustomizationTimeout.String(),
			"path":             serversPath,
			"prune":            true,
			"wait":             true,
			"targetNamespace":  namespace,
			"sourceRef":        map[string]any{"kind": gitRepositoryGVK.Kind, "name": source},
			"healthCheckExprs": healthCheckExprs,
		},
	}}
	ks.SetGroupVersionKind(kustomizationGVK)
	ks.SetNamespace(namespace)
	ks.SetName(name)
	return ks
}

// shippedHealthCheckExprs reads the healthCheckExprs of
// config/flux/embedops-servers.yaml, the ones embedops ships.
func shippedHealthCheckExprs() ([]any, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "flux", "embedops-servers.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the shipped Kustomization: %w", err)
	}
	var ks struct {
		Spec struct {
			HealthCheckExprs []any `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &ks); err != nil {
		return nil, fmt.Errorf("decoding the shipped Kustomization: %w", err)
	}
	if len(ks.Spec.HealthCheckExprs) == 0 {
		return nil, errors.New("the shipped Kustomization has no healthCheckExprs")
	}
	return ks.Spec.HealthCheckExprs, nil
}

// fluxStatus is the part of a Kustomization's status the test reads.
type fluxStatus struct {
	LastAppliedRevision   string             `json:"lastAppliedRevision,omitempty"`
	LastAttemptedRevision string             `json:"lastAttemptedRevision,omitempty"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
}

// kustomizationStatus reads a Kustomization's status.
func kustomizationStatus(ctx context.Context, key client.ObjectKey) (*fluxStatus, error) {
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	if err := cluster.Client.Get(ctx, key, ks); err != nil {
		return nil, err
	}
	status := &fluxStatus{}
	raw, _, err := unstructured.NestedMap(ks.Object, "status")
	if err != nil {
		return nil, fmt.Errorf("reading the status of Kustomization %s: %w", key, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, status); err != nil {
		return nil, fmt.Errorf("decoding the status of Kustomization %s: %w", key, err)
	}
	return status, nil
}
