package gitops

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// kustomizationGVK is the Kustomization's kind (test/harness builds the
// Flux objects).
var kustomizationGVK = harness.KustomizationGVK

// Flux settings of the test.
const (
	// branch is the branch Flux follows.
	branch = "main"
	// sourceInterval is how often source-controller looks for new commits.
	sourceInterval = 5 * time.Second
	// kustomizationTimeout bounds the Kustomization's apply and health checks.
	kustomizationTimeout = 3 * time.Minute
	// serversPath is the Kustomization's path in the repository.
	serversPath = "./servers"
)

// newGitRepository follows branch of the repository at url.
func newGitRepository(namespace, name, url string) *unstructured.Unstructured {
	return harness.NewGitRepository(harness.GitRepositoryOptions{
		Namespace: namespace, Name: name, URL: url, Branch: branch, Interval: sourceInterval,
	})
}

// newKustomization is the Kustomization kustomizationName applying
// serversPath of the GitRepository source into its own namespace, waiting
// for health with the given healthCheckExprs and pruning what leaves git.
func newKustomization(namespace, source string, healthCheckExprs []any) *unstructured.Unstructured {
	return harness.NewKustomization(harness.KustomizationOptions{
		Namespace: namespace, Name: kustomizationName, Source: source, Path: serversPath, TargetNamespace: namespace,
		Timeout: kustomizationTimeout, RetryInterval: 10 * time.Second, HealthCheckExprs: healthCheckExprs,
	})
}

// shippedHealthCheckExprs reads the healthCheckExprs of
// config/flux/embedops-servers.yaml, the ones embedops ships.
func shippedHealthCheckExprs() ([]any, error) {
	return harness.ShippedHealthCheckExprs()
}

// fluxStatus is the part of a Kustomization's status the test reads.
type fluxStatus = harness.FluxStatus

// kustomizationStatus reads a Kustomization's status.
func kustomizationStatus(ctx context.Context, key client.ObjectKey) (*fluxStatus, error) {
	return harness.KustomizationStatus(ctx, cluster.Client, key)
}
