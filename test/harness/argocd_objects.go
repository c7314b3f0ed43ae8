package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// partOfArgoCD is the label Argo CD's settings manager selects its
// ConfigMaps and Secrets by (argo-cd util/settings/settings.go,
// partOfArgoCDSelector).
var partOfArgoCD = map[string]string{"app.kubernetes.io/part-of": "argocd"}

// argoCDBaseConfigMap is argocd-cm as Argo CD's install manifests ship it
// (manifests/base/config/argocd-cm.yaml: no data; the namespace comes from
// the user's kustomization), before embedops' component patches it.
const argoCDBaseConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
`

// InstallArgoCDObjects installs the CRDs of the Argo CD that runs
// (bin/crds/argocd-run) and what Argo CD's install manifests and its API
// server would create: the namespace argocd; argocd-cm with embedops'
// health check, rendered as the README tells users (config/argocd, a
// kustomize Component, on Argo CD's argocd-cm) in dir/argocd-install;
// argocd-rbac-cm; argocd-secret with a server key; and the default
// AppProject, which only argocd-server creates.
func InstallArgoCDObjects(ctx context.Context, kubeconfig, dir string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	crds, err := argoCDBinary("crds/argocd-run")
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true, MaxTime: crdInstallTimeout}); err != nil {
		return fmt.Errorf("installing Argo CD's CRDs: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	configMap, err := RenderArgoCDConfigMap(filepath.Join(dir, "argocd-install"))
	if err != nil {
		return err
	}
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoCDNamespace}},
		configMap,
		&corev1.ConfigMap{ObjectMeta: argoCDMeta("argocd-rbac-cm")},
		&corev1.Secret{ObjectMeta: argoCDMeta("argocd-secret"), StringData: map[string]string{"server.secretkey": "embedops-test"}},
		defaultAppProject(),
	}
	for _, obj := range objects {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// RenderArgoCDConfigMap renders argocd-cm as a user's kustomization that
// installs Argo CD with embedops' component does (README, config/argocd),
// writing the kustomization into dir.
func RenderArgoCDConfigMap(dir string) (*unstructured.Unstructured, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating the kustomization directory: %w", err)
	}
	component, err := filepath.Rel(dir, filepath.Join(root, "config", "argocd"))
	if err != nil {
		return nil, err
	}
	kustomization := fmt.Sprintf("resources:\n  - argocd-cm.yaml\ncomponents:\n  - %s\n", component)
	for name, content := range map[string]string{"kustomization.yaml": kustomization, "argocd-cm.yaml": argoCDBaseConfigMap} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("rendering argocd-cm with config/argocd: %w", err)
	}
	if resources.Size() != 1 {
		return nil, fmt.Errorf("rendering argocd-cm with config/argocd: %d objects, want 1", resources.Size())
	}
	data, err := resources.Resources()[0].AsYAML()
	if err != nil {
		return nil, err
	}
	configMap := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &configMap.Object); err != nil {
		return nil, fmt.Errorf("reading the rendered argocd-cm: %w", err)
	}
	return configMap, nil
}

// argoCDMeta names one of Argo CD's own objects.
func argoCDMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ArgoCDNamespace, Labels: partOfArgoCD}
}

// defaultAppProject is the project argocd-server creates at its start
// (argo-cd server/server.go, initializeDefaultProject): any source, any
// destination, every kind.
func defaultAppProject() *unstructured.Unstructured {
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AppProject",
		"metadata":   map[string]any{"name": "default", "namespace": ArgoCDNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	return project
}
