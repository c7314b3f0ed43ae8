package main

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// Argo CD's names (argo-cd pkg/apis/application/v1alpha1 and common).
const (
	// applicationName is the Application syncing the examples, named as
	// Flux's Kustomization.
	applicationName = kustomizationName
	// inClusterServer is the destination that means the cluster Argo CD
	// runs in.
	inClusterServer = "https://kubernetes.default.svc"
	// refreshAnnotation asks the application-controller to compare with
	// git now; it removes the annotation when done.
	refreshAnnotation = "argocd.argoproj.io/refresh"
)

var applicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// argoCDTool is Argo CD's repo-server and application-controller, with
// redis, as harness.StartArgoCD runs them.
type argoCDTool struct {
	argo *harness.ArgoCD
}

func (a *argoCDTool) name() string { return "Argo CD" }

// install installs Argo CD's CRDs and namespace, its ConfigMaps with
// argocd-cm patched by config/argocd as the README tells users (embedops'
// health check), its Secret and the default AppProject.
func (a *argoCDTool) install(ctx context.Context, target installTarget) error {
	return harness.InstallArgoCDObjects(ctx, target.kubeconfig, target.dir)
}

func (a *argoCDTool) start(ctx context.Context, kubeconfig, dir string) error {
	var err error
	a.argo, err = harness.RunArgoCD(ctx, kubeconfig, dir)
	return err
}

func (a *argoCDTool) processes() []*harness.Process { return a.argo.Processes() }

func (a *argoCDTool) objects() string {
	return "the Application " + harness.ArgoCDNamespace + "/" + applicationName
}

// apply creates, in Argo CD's namespace, an Application syncing the
// examples of the repository at url on branch into namespace, automated
// and pruning, as Flux's Kustomization applies them.
func (a *argoCDTool) apply(ctx context.Context, c client.Client, url, namespace string) error {
	app := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": applicationName, "namespace": harness.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": url, "targetRevision": branch, "path": examplesPath},
			"destination": map[string]any{"server": inClusterServer, "namespace": namespace},
			"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
		},
	}}
	app.SetGroupVersionKind(applicationGVK)
	if err := c.Create(ctx, app); err != nil {
		return fmt.Errorf("creating the Application: %w", err)
	}
	return nil
}

// notApplied says what is missing until the Application synced commit and
// is Synced and Healthy; with embedops' health check, Healthy means every
// server it synced is Ready.
func (a *argoCDTool) notApplied(ctx context.Context, c client.Client, commit string) string {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(applicationGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: harness.ArgoCDNamespace, Name: applicationName}, app); err != nil {
		return err.Error()
	}
	revision, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
	sync, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
	health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
	if revision != commit || sync != "Synced" || health != "Healthy" {
		message, _, _ := unstructured.NestedString(app.Object, "status", "health", "message")
		return fmt.Sprintf("Application %s/%s is %q at %q, health %q (%s)", harness.ArgoCDNamespace, applicationName, sync, revision, health, message)
	}
	return ""
}

// refresh asks for a normal refresh, as a git host's webhook would: Argo CD
// polls git every 3 minutes.
func (a *argoCDTool) refresh(ctx context.Context, c client.Client) error {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(applicationGVK)
	app.SetNamespace(harness.ArgoCDNamespace)
	app.SetName(applicationName)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"normal"}}}`, refreshAnnotation)
	if err := c.Patch(ctx, app, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return fmt.Errorf("asking Argo CD to refresh the Application: %w", err)
	}
	return nil
}

func (a *argoCDTool) logTails() string {
	if a.argo == nil {
		return ""
	}
	return a.argo.LogTails()
}

func (a *argoCDTool) stop() error {
	if a.argo == nil {
		return nil
	}
	err := a.argo.Stop()
	a.argo = nil
	return err
}
