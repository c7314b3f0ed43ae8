//go:build linux

package node

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/harness"
)

// tokenSecretFile is the examples' Secret, token and API key alike.
const tokenSecretFile = "hf-token-secret.yaml"

// commitID is a full commit id, which the hub stand-in serves under that
// id (a pinned revision) rather than as a branch.
var commitID = regexp.MustCompile(`^[0-9a-f]{40}$`)

// TestExamplesServeFromTheirCache applies every EmbeddingServer of
// examples/ with one addition, HF_ENDPOINT pointing at a hub stand-in in
// its namespace (requiring the examples' token when the server has one),
// and checks issue 24's first case on real pods: the server is Ready, the
// real populator (the controller image's `embedops populate`) filled its
// cache, the binding recorded the hub's commit, and TEI's /info answers
// that commit to the controller's endpoint check and to the test.
func TestExamplesServeFromTheirCache(t *testing.T) {
	requireNode(t)
	t.Parallel()
	for _, file := range exampleServers(t) {
		t.Run(strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			runExample(t, file)
		})
	}
}

// exampleServers are the files of examples/ holding an EmbeddingServer.
func exampleServers(t *testing.T) []string {
	t.Helper()
	root, err := harness.RepoRoot()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	paths, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var files []string
	for _, path := range paths {
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), "\nkind: EmbeddingServer\n") {
			files = append(files, filepath.Base(path))
		}
	}
	NewWithT(t).Expect(files).NotTo(BeEmpty())
	return files
}

// runExample applies one example and checks it serves from its cache.
func runExample(t *testing.T, file string) {
	ns := harness.Namespace(t, node.Client)
	obj := readManifest(t, file)
	secret := readManifest(t, tokenSecretFile)
	server := typedServer(t, obj)
	model := server.Spec.Model
	token, apiKey := secretValue(t, secret, model.TokenSecretRef), apiKeyOf(t, server, secret)
	h := startHub(t, ns, token, hubModelOf(model))
	applyObject(t, ns, secret)
	withEnv(t, obj, "HF_ENDPOINT", h.endpoint)
	fitToNode(t, obj)
	began := time.Now()
	applyObject(t, ns, obj)
	got := waitServerReady(t, client.ObjectKey{Namespace: ns, Name: obj.GetName()})
	logServer(t, got, began)
	checkServedFromCache(t, got, h.commits[model.Name], apiKey)
}

// typedServer converts an example's object.
func typedServer(t *testing.T, obj *unstructured.Unstructured) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, server)).To(Succeed())
	return server
}

// hubModelOf is the hub's model for a server: its revision as a branch, or
// as the commit's own id when it pins one.
func hubModelOf(model embedopsv1.ModelSpec) hubModel {
	if commitID.MatchString(model.Revision) {
		return hubModel{ID: model.Name, Commit: model.Revision}
	}
	return hubModel{ID: model.Name, Branch: model.Revision}
}

// secretValue is the Secret manifest's value for ref, "" without a ref.
func secretValue(t *testing.T, secret *unstructured.Unstructured, ref *embedopsv1.SecretKeyRef) string {
	t.Helper()
	if ref == nil {
		return ""
	}
	NewWithT(t).Expect(ref.Name).To(Equal(secret.GetName()), "the examples' Secret")
	value, found, err := unstructured.NestedString(secret.Object, "stringData", ref.Key)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(found).To(BeTrue(), "the Secret has no key %s", ref.Key)
	return value
}

// apiKeyOf is the API key a server's TEI runs with, from API_KEY in its
// env (TEI router/src/main.rs: `#[clap(long, env)] api_key`).
func apiKeyOf(t *testing.T, server *embedopsv1.EmbeddingServer, secret *unstructured.Unstructured) string {
	t.Helper()
	for _, e := range server.Spec.Env {
		if e.Name != "API_KEY" {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			return e.Value
		}
		ref := e.ValueFrom.SecretKeyRef
		return secretValue(t, secret, &embedopsv1.SecretKeyRef{Name: ref.Name, Key: ref.Key})
	}
	return ""
}

// checkServedFromCache checks that the server's pods serve the hub's
// commit from a cache the real populator filled.
func checkServedFromCache(t *testing.T, server *embedopsv1.EmbeddingServer, commit, apiKey string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(commit).NotTo(BeEmpty())
	g.Expect(server.Status.EndpointCheck).To(Equal(embedopsv1.EndpointCheckEnabled), "the endpoint check is on in-cluster (auto)")
	g.Expect(*server.Status.Served).To(Equal(embedopsv1.ServedModel{
		ModelID: server.Spec.Model.Name, ModelSHA: commit, DType: server.Status.Served.DType, MaxInputLength: server.Status.Served.MaxInputLength,
		ExpectedModelSHA: commit, ComparedWith: embedopsv1.ComparedWithResolvedCommit,
	}))
	binding := bindingOf(t, server)
	g.Expect(binding.Status.Realized).NotTo(BeNil(), "binding %s recorded nothing", binding.Name)
	g.Expect(binding.Status.Realized.ResolvedCommit).To(Equal(commit))
	g.Expect(binding.Status.Realized.Bytes).To(HaveValue(BeNumerically(">", 0)))
	pods := serverPods(t, server)
	g.Expect(pods).To(HaveLen(int(*server.Spec.Replicas)))
	checkPopulated(t, server, binding, pods)
	for i := range pods {
		tei := podTEI(&pods[i], server.Spec.Port, apiKey)
		g.Expect(tei.info(t)).To(Equal(teiInfo{ModelID: server.Spec.Model.Name, ModelSHA: commit}), "pod %s", pods[i].Name)
		g.Expect(tei.embed(t, "What is an embedding?")).To(HaveLen(1), "pod %s", pods[i].Name)
	}
}

// checkPopulated checks that the populator in the controller's image
// filled the cache: each pod's populate init container (PerReplica) or
// the binding's one Job, run once (Shared).
func checkPopulated(t *testing.T, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, pods []corev1.Pod) {
	t.Helper()
	g := NewWithT(t)
	if server.Spec.Cache.Mode == embedopsv1.CacheModeShared {
		job := &batchv1.Job{}
		g.Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: server.Namespace, Name: builder.PopulateJobName(binding.Name)}, job)).To(Succeed())
		g.Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal(installedControllerImage))
		g.Expect(job.Status.Succeeded).To(BeEquivalentTo(1))
		g.Expect(job.Status.Failed).To(BeZero(), "the Job filled the cache at its first attempt")
		for _, pod := range pods {
			g.Expect(pod.Spec.InitContainers).To(BeEmpty(), "pod %s reads the shared cache the Job filled", pod.Name)
			g.Expect(claimsOf(&pod)).To(Equal(binding.Spec.Resources.PersistentVolumeClaimNames), "pod %s", pod.Name)
		}
		return
	}
	for _, pod := range pods {
		statuses := pod.Status.InitContainerStatuses
		g.Expect(statuses).To(HaveLen(1), "pod %s", pod.Name)
		g.Expect(statuses[0].Name).To(Equal(builder.PopulateContainerName))
		g.Expect(pod.Spec.InitContainers[0].Image).To(Equal(installedControllerImage))
		g.Expect(statuses[0].State.Terminated).NotTo(BeNil(), "pod %s", pod.Name)
		g.Expect(statuses[0].State.Terminated.ExitCode).To(BeZero(), "pod %s: %s", pod.Name, statuses[0].State.Terminated.Message)
	}
}

// claimsOf are the claims a pod mounts.
func claimsOf(pod *corev1.Pod) []string {
	var claims []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return claims
}

// gpuResource is the extended resource examples/advanced.yaml asks for.
const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// fitToNode changes only what an example asks for that this node cannot
// give: GPUs are advertised on the node as an extended resource (the
// node status patch of "Advertise Extended Resources for a Node"; no
// device plugin, which the TEI stand-in does not need), and a CPU request
// of the node's whole allocatable CPU or more is lowered to 500m.
func fitToNode(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	resources, found, err := unstructured.NestedMap(obj.Object, "spec", "resources")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	if !found {
		return
	}
	typed := corev1.ResourceRequirements{}
	NewWithT(t).Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(resources, &typed)).To(Succeed())
	if gpus, ok := typed.Limits[gpuResource]; ok {
		advertiseGPUs(t, gpus)
	}
	allocatable := nodeAllocatableCPU(t)
	if cpu, ok := typed.Requests[corev1.ResourceCPU]; ok && cpu.Cmp(allocatable) >= 0 {
		t.Logf("%s requests %s CPU, the node has %s: lowered to 500m", obj.GetName(), cpu.String(), allocatable.String())
		NewWithT(t).Expect(unstructured.SetNestedField(obj.Object, "500m", "spec", "resources", "requests", "cpu")).To(Succeed())
	}
}
