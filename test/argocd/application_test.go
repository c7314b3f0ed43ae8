package argocd

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// Argo CD's names (argo-cd pkg/apis/application/v1alpha1 and common).
const (
	// inClusterServer is the destination that means the cluster Argo CD
	// runs in.
	inClusterServer = "https://kubernetes.default.svc"
	// resourcesFinalizer makes deleting an Application delete what it
	// synced, with Foreground propagation.
	resourcesFinalizer = "resources-finalizer.argocd.argoproj.io"
	// refreshAnnotation asks the controller for a refresh; it removes the
	// annotation when it writes the refreshed status.
	refreshAnnotation = "argocd.argoproj.io/refresh"
)

var applicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// appStatus is the part of an Application's status the tests read.
type appStatus struct {
	Health struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"health"`
	Sync struct {
		Status    string   `json:"status"`
		Revision  string   `json:"revision"`
		Revisions []string `json:"revisions"`
	} `json:"sync"`
	Resources      []appResource `json:"resources"`
	OperationState struct {
		Phase      string `json:"phase"`
		Message    string `json:"message"`
		SyncResult struct {
			Revision string `json:"revision"`
		} `json:"syncResult"`
	} `json:"operationState"`
}

// appResource is one entry of status.resources.
type appResource struct {
	Group           string `json:"group"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	Status          string `json:"status"`
	RequiresPruning bool   `json:"requiresPruning"`
}

// createApplication creates, in Argo CD's namespace, an Application named
// name that syncs path of the repository at url on branch into namespace
// automatically, pruning, with the resources finalizer, and deletes it when
// the test ends.
func createApplication(t *testing.T, name, namespace, url, path string) {
	t.Helper()
	createApplicationFrom(t, name, namespace, gitSource(url, path))
}

// gitSource is an Application source: path of the repository at url on
// branch.
func gitSource(url, path string) map[string]any {
	return map[string]any{"repoURL": url, "targetRevision": branch, "path": path}
}

// createApplicationFrom is createApplication with the sources given: one
// is spec.source, more are spec.sources.
func createApplicationFrom(t *testing.T, name, namespace string, sources ...map[string]any) {
	t.Helper()
	spec := map[string]any{
		"project":     "default",
		"destination": map[string]any{"server": inClusterServer, "namespace": namespace},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
	if len(sources) == 1 {
		spec["source"] = sources[0]
	} else {
		list := make([]any, len(sources))
		for i, source := range sources {
			list[i] = source
		}
		spec["sources"] = list
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": name, "namespace": harness.ArgoCDNamespace,
			"finalizers": []any{resourcesFinalizer},
		},
		"spec": spec,
	}}
	app.SetGroupVersionKind(applicationGVK)
	NewWithT(t).Expect(cluster.Client.Create(t.Context(), app)).To(Succeed())
	t.Cleanup(func() {
		// The test's context is already cancelled during cleanup.
		_ = client.IgnoreNotFound(cluster.Client.Delete(context.Background(), app))
	})
}

// getApplication reads the Application named name.
func getApplication(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(applicationGVK)
	err := cluster.Client.Get(ctx, applicationKey(name), app)
	return app, err
}

// applicationStatus reads the status of the Application named name.
func applicationStatus(ctx context.Context, name string) (*appStatus, error) {
	app, err := getApplication(ctx, name)
	if err != nil {
		return nil, err
	}
	status := &appStatus{}
	raw, err := json.Marshal(app.Object["status"])
	if err != nil {
		return nil, err
	}
	return status, json.Unmarshal(raw, status)
}

// applicationKey names an Application in Argo CD's namespace.
func applicationKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: harness.ArgoCDNamespace, Name: name}
}

// annotateApplication sets an annotation on the Application.
func annotateApplication(t *testing.T, name, key, value string) {
	t.Helper()
	app, err := getApplication(t.Context(), name)
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	patch := client.MergeFrom(app.DeepCopy())
	annotations := app.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	app.SetAnnotations(annotations)
	g.Expect(cluster.Client.Patch(t.Context(), app, patch)).To(Succeed())
}

// setArgoCDConfig sets key in argocd-cm until the test ends; Argo CD reads
// its settings from the ConfigMap as they change.
func setArgoCDConfig(t *testing.T, key, value string) {
	t.Helper()
	g := NewWithT(t)
	configMap := &corev1.ConfigMap{}
	name := client.ObjectKey{Namespace: harness.ArgoCDNamespace, Name: "argocd-cm"}
	g.Expect(cluster.Client.Get(t.Context(), name, configMap)).To(Succeed())
	patch := client.MergeFrom(configMap.DeepCopy())
	configMap.Data[key] = value
	g.Expect(cluster.Client.Patch(t.Context(), configMap, patch)).To(Succeed())
	t.Cleanup(func() {
		restore := &corev1.ConfigMap{}
		if err := cluster.Client.Get(context.Background(), name, restore); err != nil {
			t.Error(err)
			return
		}
		patch := client.MergeFrom(restore.DeepCopy())
		delete(restore.Data, key)
		if err := cluster.Client.Patch(context.Background(), restore, patch); err != nil {
			t.Error(err)
		}
	})
}
