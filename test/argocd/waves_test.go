package argocd

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// Names in gitops/argocd.
const (
	// layoutRepoURL is the repository gitops/argocd's Applications name.
	layoutRepoURL     = "https://git.example.com/embedops/embedops.git"
	rootApp           = "embedops"
	examplesNamespace = "embedops-examples"
	// applicationHealthKey is the Application health check gitops/README.md
	// (Argo CD, step 2) tells users to add, without which an app of apps
	// does not wait for one wave's Application to be Healthy.
	applicationHealthKey = "resource.customizations.health.argoproj.io_Application"
	applicationHealth    = `hs = {}
hs.status = "Progressing"
hs.message = ""
if obj.status ~= nil and obj.status.health ~= nil then
  hs.status = obj.status.health.status
  if obj.status.health.message ~= nil then
    hs.message = obj.status.health.message
  end
end
return hs
`
)

// unknownSyncApp is the Application whose sync status v2.14 cannot tell
// against Kubernetes 1.37: with ServerSideApply=true it diffs with its own
// (Kubernetes 1.31) schema, which lacks the Deployment's
// status.terminatingReplicas ("ComparisonError: ... field not declared in
// schema"). Its sync operation succeeds and it is Healthy; only the
// comparison afterwards fails.
const unknownSyncApp = "embedops-operator"

// waves are gitops/argocd's Applications in sync-wave order.
var waves = []string{"embedops-crds", "embedops-operator", "embedops-examples"}

// TestArgoCDSyncsTheGitOpsLayoutInWaves pushes config/, examples/ and
// gitops/argocd/ to the git server, its repository URL in place of the
// placeholder, and applies root-app.yaml with the Application health check
// as gitops/README.md says: the three Applications are created in wave
// order, none before the one before it is Healthy (on kwok each is Healthy
// within Argo CD's 2 s delay between waves, so this holds without the
// health check too: it proves the order, not the wait), each sync operation succeeds at the pushed commit (the
// repo-server runs kustomize for them), all end Healthy and all but
// unknownSyncApp Synced, and the minimal example's binding records the
// examples Application's commit.
func TestArgoCDSyncsTheGitOpsLayoutInWaves(t *testing.T) {
	setArgoCDConfig(t, applicationHealthKey, applicationHealth)
	repo := newRepository(t, "embedops/embedops.git")
	files := layoutFiles(t, repo.URL)
	revision := commit(t, repo, "The embedops GitOps layout", files)
	t.Cleanup(func() { deleteLayout(t) })
	createRootApp(t, files["gitops/argocd/root-app.yaml"])

	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		for _, app := range append([]string{rootApp}, waves...) {
			status, err := applicationStatus(t.Context(), app)
			g.Expect(err).NotTo(HaveOccurred(), app)
			g.Expect(status.Health.Status).To(Equal("Healthy"), "%s: %s", app, status.Health.Message)
			g.Expect(status.OperationState.Phase).To(Equal("Succeeded"), "%s: %s", app, status.OperationState.Message)
			g.Expect(status.OperationState.SyncResult.Revision).To(Equal(revision), app)
			if app == unknownSyncApp {
				continue
			}
			g.Expect(status.Sync.Status).To(Equal("Synced"), "%s: %+v", app, status.Resources)
			g.Expect(status.Sync.Revision).To(Equal(revision), app)
		}
	}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())

	for i := 1; i < len(waves); i++ {
		before, after := applicationTimes(t, waves[i-1]), applicationTimes(t, waves[i])
		g.Expect(after.created.Before(&before.healthy)).To(BeFalse(),
			"%s was created at %s, before %s turned Healthy at %s", waves[i], after.created, waves[i-1], before.healthy)
	}
	server := &embedopsv1.EmbeddingServer{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: examplesNamespace, Name: "minimal"}, server)).To(Succeed())
	binding := &embedopsv1.ModelCacheBinding{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: examplesNamespace, Name: server.Status.CacheBinding}, binding)).To(Succeed())
	g.Expect(binding.Spec.Source.Method).To(Equal(embedopsv1.SourceArgoCD))
	g.Expect(binding.Spec.Source.Commit).To(Equal(revision))
	g.Expect(binding.Spec.Source.Path).To(Equal("examples"))
}

// layoutFiles reads config/, examples/ and gitops/argocd/ from the
// working tree, the Applications' repoURL replaced with url.
func layoutFiles(t *testing.T, url string) map[string]string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, dir := range []string{"config", "examples", "gitops/argocd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, entry fs.DirEntry, err error) error {
			if err != nil || entry.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(rel)] = strings.ReplaceAll(string(data), layoutRepoURL, url)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// createRootApp creates the app of apps from its manifest.
func createRootApp(t *testing.T, manifest string) {
	t.Helper()
	app := &unstructured.Unstructured{}
	g := NewWithT(t)
	g.Expect(yaml.Unmarshal([]byte(manifest), &app.Object)).To(Succeed())
	g.Expect(cluster.Client.Create(t.Context(), app)).To(Succeed())
}

// appTimes are when an Application was created and last turned Healthy.
type appTimes struct {
	created metav1.Time
	healthy metav1.Time
}

// applicationTimes reads them.
func applicationTimes(t *testing.T, name string) appTimes {
	t.Helper()
	app, err := getApplication(t.Context(), name)
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	transition, _, _ := unstructured.NestedString(app.Object, "status", "health", "lastTransitionTime")
	healthy, err := time.Parse(time.RFC3339, transition)
	g.Expect(err).NotTo(HaveOccurred(), "%s health lastTransitionTime %q", name, transition)
	return appTimes{created: app.GetCreationTimestamp(), healthy: metav1.NewTime(healthy)}
}

// deleteLayout deletes the root Application and its children without
// their resources (none has the resources finalizer: the CRDs stay), and
// the examples' namespace.
func deleteLayout(t *testing.T) {
	ctx := context.Background()
	for _, name := range append([]string{rootApp}, waves...) {
		app := &unstructured.Unstructured{}
		app.SetGroupVersionKind(applicationGVK)
		app.SetNamespace(harness.ArgoCDNamespace)
		app.SetName(name)
		if err := client.IgnoreNotFound(cluster.Client.Delete(ctx, app)); err != nil {
			t.Error(err)
		}
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: examplesNamespace}}
	if err := client.IgnoreNotFound(cluster.Client.Delete(ctx, namespace)); err != nil {
		t.Error(err)
	}
}
