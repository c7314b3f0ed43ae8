package argocd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/cli"
	"github.com/embedops/embedops/test/harness"
)

// Waits, generous: the machine has 2 cores shared with other clusters.
const (
	// settle bounds one step: a commit reaching the cluster and settling.
	settle = 5 * time.Minute
	// pollInterval is how often the tests look.
	pollInterval = 500 * time.Millisecond
	// branch is the branch the tests commit to and Applications follow.
	branch = "main"
	// serversPath is the directory of the repositories holding servers.
	serversPath = "servers"
)

// newRepository creates a repository at path on the git server with a
// local clone.
func newRepository(t *testing.T, path string) *harness.GitRepo {
	t.Helper()
	repo, err := harness.CreateGitRepo(gitServer, path, branch)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// commit writes files, commits them with subject, pushes and returns the
// commit's sha.
func commit(t *testing.T, repo *harness.GitRepo, subject string, files map[string]string) string {
	t.Helper()
	hash, err := repo.Commit(t.Context(), subject, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s %s", hash, subject)
	return hash
}

// serverFile is where the server named name is committed.
func serverFile(name string) string { return serversPath + "/" + name + ".yaml" }

// serverManifest is the server named name as committed: a PerReplica cache
// in storageClass, kept retainFor once unused; tokenSecret, when set, names
// the Secret holding its HuggingFace token.
func serverManifest(name, storageClass, retainFor, tokenSecret string) string {
	token := ""
	if tokenSecret != "" {
		token = fmt.Sprintf("    tokenSecretRef:\n      name: %s\n      key: token\n", tokenSecret)
	}
	return fmt.Sprintf(`apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: %s
spec:
  model:
    name: BAAI/bge-small-en-v1.5
%s  cache:
    storageClassName: %s
    size: 1Gi
    retainFor: %s
`, name, token, storageClass, retainFor)
}

// newStorageClass creates a StorageClass served by the test provisioner,
// like harness.DefaultStorageClass, and deletes it when the test ends.
func newStorageClass(t *testing.T, name string) string {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       harness.ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	NewWithT(t).Expect(cluster.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), class) })
	return name
}

// readyAtGeneration reads the server into server and reports whether it is
// Ready at its current generation; a server not created yet is not Ready.
func readyAtGeneration(ctx context.Context, g Gomega, key client.ObjectKey, server *embedopsv1.EmbeddingServer) bool {
	err := cluster.Client.Get(ctx, key, server)
	if client.IgnoreNotFound(err) == nil && err != nil {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	ready := meta.FindStatusCondition(server.Status.Conditions, embedopsv1.ReadyCondition)
	return ready != nil && ready.Status == metav1.ConditionTrue && server.Status.ObservedGeneration == server.Generation
}

// expectArgoCDBinding checks that the server's binding is Active and
// records the Application, its repository and the commit it synced; it
// returns the binding.
func expectArgoCDBinding(t *testing.T, server *embedopsv1.EmbeddingServer, app, url, commit string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	return expectArgoCDBindingAt(t, server, app, url, serversPath, commit)
}

// expectArgoCDBindingAt is expectArgoCDBinding for a source at path.
func expectArgoCDBindingAt(t *testing.T, server *embedopsv1.EmbeddingServer, app, url, path, commit string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	g := NewWithT(t)
	g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())
	binding := &embedopsv1.ModelCacheBinding{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: server.Namespace, Name: server.Status.CacheBinding}, binding)).To(Succeed())
	g.Expect(binding.Status.Phase).To(Equal(embedopsv1.BindingActive))
	source := binding.Spec.Source
	g.Expect(source.Method).To(Equal(embedopsv1.SourceArgoCD))
	g.Expect(source.Repository).To(Equal(url))
	g.Expect(source.Path).To(Equal(path))
	g.Expect(source.Commit).To(Equal(commit))
	g.Expect(source.ObjectRef).To(Equal(&embedopsv1.SourceObjectReference{
		APIVersion: applicationGVK.GroupVersion().String(), Kind: applicationGVK.Kind,
		Namespace: harness.ArgoCDNamespace, Name: app,
	}))
	return binding
}

// expectAudited runs `embedops audit -o json` on the binding, cloning its
// recorded repository into a fresh cache, and checks that it is Verified at
// commit, pushed with subject.
func expectAudited(t *testing.T, namespace, binding, commit, subject string) {
	t.Helper()
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	root := cli.NewRootCommand()
	root.SetArgs([]string{"audit", "--kubeconfig", cluster.Kubeconfig, "-n", namespace, "--cache-dir", t.TempDir(), "-o", "json", binding})
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	g.Expect(root.ExecuteContext(t.Context())).To(Succeed(), "embedops audit: %s", stderr.String())
	t.Logf("embedops audit:\n%s", stdout.String())
	var results []audit.Result
	g.Expect(json.Unmarshal(stdout.Bytes(), &results)).To(Succeed())
	g.Expect(results).To(HaveLen(1))
	r := results[0]
	g.Expect(r.Result).To(Equal(audit.Verified), "%s: %s %v", r.Binding, r.Reason, r.Differences)
	g.Expect(r.RecordedCommit).To(Equal(commit))
	g.Expect(r.OriginCommit).To(Equal(commit))
	g.Expect(r.OriginSubject).To(Equal(subject))
}

// step runs f as a subtest and stops the test when it fails: each step
// builds on the cluster state the previous one left.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}
