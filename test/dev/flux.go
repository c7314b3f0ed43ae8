package main

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// Flux's objects and settings in the dev cluster.
const (
	// fluxNamespace holds the GitRepository and the Kustomization, as a
	// Flux bootstrap would.
	fluxNamespace = "flux-system"
	// gitRepositoryName is the GitRepository following the dev repository.
	gitRepositoryName = "embedops-dev"
	// kustomizationName is the Kustomization applying the examples, named
	// as in gitops/flux.
	kustomizationName = "embedops-examples"
	// sourceInterval is how often source-controller looks for new commits;
	// `dev change` also asks it to look at once.
	sourceInterval = 30 * time.Second
	// kustomizationTimeout bounds an apply and its health checks.
	kustomizationTimeout = 5 * time.Minute
	// requestedAtAnnotation asks a Flux object to reconcile now, as
	// `flux reconcile source git` does (fluxcd/pkg/apis/meta annotations.go).
	requestedAtAnnotation = "reconcile.fluxcd.io/requestedAt"
)

// fluxTool is Flux's source-controller and kustomize-controller.
type fluxTool struct {
	flux *harness.Flux
}

func (f *fluxTool) name() string { return "Flux" }

// install installs Flux's CRDs and its namespace.
func (f *fluxTool) install(ctx context.Context, target installTarget) error {
	if err := harness.InstallFluxCRDs(target.config); err != nil {
		return err
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}}
	if err := target.client.Create(ctx, namespace); err != nil {
		return fmt.Errorf("creating the %s namespace: %w", fluxNamespace, err)
	}
	return nil
}

func (f *fluxTool) start(ctx context.Context, kubeconfig, dir string) error {
	var err error
	f.flux, err = harness.StartFlux(ctx, kubeconfig, dir)
	return err
}

func (f *fluxTool) processes() []*harness.Process { return f.flux.Processes() }

func (f *fluxTool) objects() string { return "the GitRepository and the Kustomization" }

// apply creates the GitRepository following the dev repository and the
// Kustomization applying its examples with wait: true and the
// healthCheckExprs embedops ships.
func (f *fluxTool) apply(ctx context.Context, c client.Client, url, namespace string) error {
	exprs, err := harness.ShippedHealthCheckExprs()
	if err != nil {
		return err
	}
	repo := harness.NewGitRepository(harness.GitRepositoryOptions{
		Namespace: fluxNamespace, Name: gitRepositoryName, URL: url, Branch: branch, Interval: sourceInterval,
	})
	if err := c.Create(ctx, repo); err != nil {
		return fmt.Errorf("creating the GitRepository: %w", err)
	}
	if err := c.Create(ctx, examplesKustomization(namespace, exprs)); err != nil {
		return fmt.Errorf("creating the Kustomization: %w", err)
	}
	return nil
}

// examplesKustomization is the Kustomization applying the dev repository's
// examples to namespace, with healthCheckExprs exprs.
func examplesKustomization(namespace string, exprs []any) *unstructured.Unstructured {
	return harness.NewKustomization(harness.KustomizationOptions{
		Namespace: fluxNamespace, Name: kustomizationName, Source: gitRepositoryName, Path: "./" + examplesPath,
		TargetNamespace: namespace, Timeout: kustomizationTimeout, RetryInterval: 10 * time.Second, HealthCheckExprs: exprs,
	})
}

// notApplied says what is missing until the Kustomization applied commit
// and is Ready, which with wait: true means every server it applied is
// healthy.
func (f *fluxTool) notApplied(ctx context.Context, c client.Client, commit string) string {
	status, err := harness.KustomizationStatus(ctx, c, client.ObjectKey{Namespace: fluxNamespace, Name: kustomizationName})
	if err != nil {
		return err.Error()
	}
	ready := apimeta.FindStatusCondition(status.Conditions, meta.ReadyCondition)
	if status.LastAppliedRevision != fluxRevision(commit) || ready == nil || ready.Status != metav1.ConditionTrue {
		return fmt.Sprintf("Kustomization %s/%s has applied %q, Ready: %s", fluxNamespace, kustomizationName, status.LastAppliedRevision, describe(ready))
	}
	return ""
}

// fluxRevision is how source-controller writes a commit on branch.
func fluxRevision(commit string) string {
	return branch + "@sha1:" + commit
}

// refresh annotates the GitRepository so that source-controller fetches
// now.
func (f *fluxTool) refresh(ctx context.Context, c client.Client) error {
	repo := &unstructured.Unstructured{}
	repo.SetGroupVersionKind(harness.GitRepositoryGVK)
	repo.SetNamespace(fluxNamespace)
	repo.SetName(gitRepositoryName)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, requestedAtAnnotation, time.Now().Format(time.RFC3339Nano))
	if err := c.Patch(ctx, repo, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return fmt.Errorf("asking source-controller to fetch the change: %w", err)
	}
	return nil
}

func (f *fluxTool) logTails() string {
	if f.flux == nil {
		return ""
	}
	return f.flux.LogTails()
}

func (f *fluxTool) stop() error {
	if f.flux == nil {
		return nil
	}
	err := f.flux.Stop()
	f.flux = nil
	return err
}
