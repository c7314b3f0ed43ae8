package harness

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
)

// The Flux kinds the tests and make dev create, read as unstructured:
// embedops' module does not depend on Flux's APIs.
var (
	// GitRepositoryGVK is source-controller's GitRepository.
	GitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
	// KustomizationGVK is kustomize-controller's Kustomization.
	KustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

// GitRepositoryOptions describe a Flux GitRepository.
type GitRepositoryOptions struct {
	Namespace, Name string
	// URL is the repository's address.
	URL string
	// Branch is the branch followed.
	Branch string
	// Interval is how often source-controller looks for new commits.
	Interval time.Duration
}

// NewGitRepository returns a GitRepository following opts.Branch of
// opts.URL.
func NewGitRepository(opts GitRepositoryOptions) *unstructured.Unstructured {
	repo := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"interval": opts.Interval.String(),
			"timeout":  "60s",
			"url":      opts.URL,
			"ref":      map[string]any{"branch": opts.Branch},
		},
	}}
	repo.SetGroupVersionKind(GitRepositoryGVK)
	repo.SetNamespace(opts.Namespace)
	repo.SetName(opts.Name)
	return repo
}

// KustomizationOptions describe a Flux Kustomization that applies a path of
// a GitRepository with wait and prune.
type KustomizationOptions struct {
	Namespace, Name string
	// Source names the GitRepository, in Namespace.
	Source string
	// Path is the path in the repository.
	Path string
	// TargetNamespace is where the objects go.
	TargetNamespace string
	// Timeout bounds the apply and the health checks.
	Timeout time.Duration
	// RetryInterval is how long a failed apply waits before the next.
	RetryInterval time.Duration
	// HealthCheckExprs are kustomize-controller's CEL health checks.
	HealthCheckExprs []any
}

// NewKustomization returns a Kustomization that applies opts.Path of the
// source into opts.TargetNamespace, waiting for health (wait: true) and
// pruning what leaves git.
func NewKustomization(opts KustomizationOptions) *unstructured.Unstructured {
	ks := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"interval":         "10m",
			"retryInterval":    opts.RetryInterval.String(),
			"timeout":          opts.Timeout.String(),
			"path":             opts.Path,
			"prune":            true,
			"wait":             true,
			"targetNamespace":  opts.TargetNamespace,
			"sourceRef":        map[string]any{"kind": GitRepositoryGVK.Kind, "name": opts.Source},
			"healthCheckExprs": opts.HealthCheckExprs,
		},
	}}
	ks.SetGroupVersionKind(KustomizationGVK)
	ks.SetNamespace(opts.Namespace)
	ks.SetName(opts.Name)
	return ks
}

// ShippedHealthCheckExprs reads the healthCheckExprs of
// config/flux/embedops-servers.yaml, the ones embedops ships.
func ShippedHealthCheckExprs() ([]any, error) {
	root, err := RepoRoot()
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

// FluxStatus is the part of a Flux object's status the tests read.
type FluxStatus struct {
	LastAppliedRevision   string             `json:"lastAppliedRevision,omitempty"`
	LastAttemptedRevision string             `json:"lastAttemptedRevision,omitempty"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
}

// KustomizationStatus reads a Kustomization's status.
func KustomizationStatus(ctx context.Context, c client.Client, key client.ObjectKey) (*FluxStatus, error) {
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(KustomizationGVK)
	if err := c.Get(ctx, key, ks); err != nil {
		return nil, err
	}
	status := &FluxStatus{}
	raw, _, err := unstructured.NestedMap(ks.Object, "status")
	if err != nil {
		return nil, fmt.Errorf("reading the status of Kustomization %s: %w", key, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, status); err != nil {
		return nil, fmt.Errorf("decoding the status of Kustomization %s: %w", key, err)
	}
	return status, nil
}
