package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The operator as config/default installs it.
const (
	// OperatorNamespace holds the controller (config/default's namespace).
	OperatorNamespace = "embedops-system"
	// OperatorDeployment is the controller's Deployment: config/manager's
	// "controller" under config/default's namePrefix "embedops-".
	OperatorDeployment = "embedops-controller"
	// OperatorServiceAccount is the controller's ServiceAccount, named the
	// same way (config/rbac).
	OperatorServiceAccount = "embedops-controller"
	// OperatorFieldManager applies the operator's objects, as
	// `kubectl apply --server-side` does by default.
	OperatorFieldManager = "kubectl"
)

// operatorTimeout bounds the CRDs' establishment and the Deployment's
// availability: an image already imported, a readiness probe after 5 s.
const operatorTimeout = 3 * time.Minute

// RenderOperator builds a kustomization (config/default or an overlay of
// it) as `kustomize build` does, in its default legacy order (--reorder
// legacy): namespaces and CRDs before what they hold.
func RenderOperator(dir string) ([]*unstructured.Unstructured, error) {
	options := krusty.MakeDefaultOptions()
	options.Reorder = krusty.ReorderOptionLegacy
	resources, err := krusty.MakeKustomizer(options).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objects []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		objects = append(objects, &unstructured.Unstructured{Object: m})
	}
	return objects, nil
}

// WriteOperatorOverlay writes into dir a kustomization of config/default
// that sets the controller image, as the README tells a user to
// (`kustomize edit set image embedops-controller=<image>`, and
// config/manager/populator-image listed again so --populator-image
// follows the image). The image is name:tag.
func WriteOperatorOverlay(dir, name, tag string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	base, err := filepath.Rel(dir, filepath.Join(root, "config", "default"))
	if err != nil {
		return err
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: embedops-controller
    newName: %s
    newTag: %s
transformers:
  - %s
`, base, name, tag, filepath.Join(filepath.Dir(base), "manager", "populator-image"))
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644)
}

// InstallOperator renders the kustomization at dir, server-side applies
// every object as OperatorFieldManager in order, and waits until the CRDs
// are established and the controller's Deployment is Available.
func InstallOperator(ctx context.Context, c client.Client, dir string) error {
	objects, err := RenderOperator(dir)
	if err != nil {
		return err
	}
	for _, obj := range objects {
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(OperatorFieldManager), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, operatorTimeout)
	defer cancel()
	for _, obj := range objects {
		if obj.GetKind() == "CustomResourceDefinition" {
			if err := waitFor(ctx, "CRD "+obj.GetName(), crdEstablished(c, obj.GetName())); err != nil {
				return err
			}
		}
	}
	key := client.ObjectKey{Namespace: OperatorNamespace, Name: OperatorDeployment}
	return waitFor(ctx, "Deployment "+key.String()+" to be Available", deploymentAvailable(c, key))
}

// crdEstablished checks a CRD's Established condition.
func crdEstablished(c client.Client, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("CRD %s is not established", name)
	}
}

// deploymentAvailable checks that a Deployment rolled out its current
// generation and is Available (apps/v1 DeploymentAvailable).
func deploymentAvailable(c client.Client, key client.ObjectKey) func(context.Context) error {
	return func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != d.Status.Replicas {
			return fmt.Errorf("deployment %s is rolling out: %+v", key, d.Status)
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("deployment %s is not Available: %+v", key, d.Status.Conditions)
	}
}

// waitFor polls condition until it returns nil, returning its last error.
func waitFor(ctx context.Context, what string, condition func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		last = condition(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, errors.Join(err, last))
	}
	return nil
}
