//go:build linux

package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// serverTimeout bounds a server reaching Ready on 2 busy cores: a resolve
// Job, then pods whose startup and readiness probes run every 10 s
// (internal/builder), then the endpoint check.
const serverTimeout = 5 * time.Minute

// gitops is the field manager servers are applied as, as Flux's
// server-side apply would.
const gitops = "gitops"

// readManifest reads examples/<file>, one object.
func readManifest(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	root, err := harness.RepoRoot()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "examples", file))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	obj := &unstructured.Unstructured{}
	NewWithT(t).Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed())
	return obj
}

// serverObject turns a typed server into the object applyObject takes.
func serverObject(t testing.TB, server *embedopsv1.EmbeddingServer) *unstructured.Unstructured {
	t.Helper()
	server.SetGroupVersionKind(embedopsv1.GroupVersion.WithKind("EmbeddingServer"))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(server)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	delete(m, "status")
	return &unstructured.Unstructured{Object: m}
}

// withEnv appends name=value to a server's spec.env.
func withEnv(t *testing.T, obj *unstructured.Unstructured, name, value string) {
	t.Helper()
	env, _, err := unstructured.NestedSlice(obj.Object, "spec", "env")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	env = append(env, map[string]any{"name": name, "value": value})
	NewWithT(t).Expect(unstructured.SetNestedSlice(obj.Object, env, "spec", "env")).To(Succeed())
}

// applyObject server-side applies obj into ns as gitops.
func applyObject(t testing.TB, ns string, obj *unstructured.Unstructured) {
	t.Helper()
	obj.SetNamespace(ns)
	NewWithT(t).Expect(node.Client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(gitops), client.ForceOwnership)).To(Succeed(), "applying %s %s", obj.GetKind(), obj.GetName())
}

// waitServerReady waits until the server is Ready because it is Available
// with every replica ready, and the controller's endpoint check recorded
// TEI's /info (status.served), and returns it.
func waitServerReady(t testing.TB, key client.ObjectKey) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(node.Client.Get(t.Context(), key, server)).To(Succeed())
		ready := conditions.Get(server, embedopsv1.ReadyCondition)
		done := ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == embedopsv1.AvailableReason &&
			server.Spec.Replicas != nil && server.Status.ReadyReplicas == *server.Spec.Replicas && server.Status.Served != nil
		g.Expect(done).To(BeTrue(), func() string { return report(t, server) })
	}).WithContext(t.Context()).WithTimeout(serverTimeout).WithPolling(time.Second).Should(Succeed())
	return server
}

// bindingOf is the server's binding in use.
func bindingOf(t *testing.T, server *embedopsv1.EmbeddingServer) *embedopsv1.ModelCacheBinding {
	t.Helper()
	NewWithT(t).Expect(server.Status.CacheBinding).NotTo(BeEmpty(), "server %s has no binding", server.Name)
	binding := &embedopsv1.ModelCacheBinding{}
	NewWithT(t).Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: server.Namespace, Name: server.Status.CacheBinding}, binding)).To(Succeed())
	return binding
}

// serverPods are the server's pods, by its status.selector.
func serverPods(t testing.TB, server *embedopsv1.EmbeddingServer) []corev1.Pod {
	t.Helper()
	selector, err := labels.Parse(server.Status.Selector)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	pods := &corev1.PodList{}
	NewWithT(t).Expect(node.Client.List(t.Context(), pods, client.InNamespace(server.Namespace), client.MatchingLabelsSelector{Selector: selector})).To(Succeed())
	return pods.Items
}

// tei is a client of a TEI pod inside the node's namespace; the test
// reaches pods at their addresses: the namespace has no route to
// ServiceCIDR, so a ClusterIP from the test process is unreachable (the
// controller reaches Services from its pod).
type tei struct {
	// base is http://<address>:<port>.
	base string
	// apiKey is sent as TEI's bearer token when set.
	apiKey string
	client *http.Client
}

// podTEI reaches one pod at its address.
func podTEI(pod *corev1.Pod, port int32, apiKey string) *tei {
	return newTEI(net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))), apiKey)
}

func newTEI(address, apiKey string) *tei {
	return &tei{base: "http://" + address, apiKey: apiKey, client: &http.Client{
		Transport: &http.Transport{DialContext: node.Dial, Proxy: nil},
		Timeout:   30 * time.Second,
	}}
}

// teiInfo is the part of TEI's /info the tests read
// (router/src/http/types.rs Info).
type teiInfo struct {
	ModelID  string `json:"model_id"`
	ModelSHA string `json:"model_sha"`
}

// info GETs /info.
func (c *tei) info(t *testing.T) teiInfo {
	t.Helper()
	var info teiInfo
	NewWithT(t).Expect(json.Unmarshal(c.do(t, http.MethodGet, "/info", nil), &info)).To(Succeed())
	return info
}

// embed POSTs one input to /embed and returns the vectors TEI answered
// (router/src/http/types.rs EmbedRequest, EmbedResponse).
func (c *tei) embed(t *testing.T, input string) [][]float32 {
	t.Helper()
	body, err := json.Marshal(map[string]any{"inputs": input})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var vectors [][]float32
	NewWithT(t).Expect(json.Unmarshal(c.do(t, http.MethodPost, "/embed", body), &vectors)).To(Succeed())
	return vectors
}

// do sends a request and returns the body of a 200 answer.
func (c *tei) do(t *testing.T, method, path string, body []byte) []byte {
	t.Helper()
	g := NewWithT(t)
	req, err := http.NewRequestWithContext(t.Context(), method, c.base+path, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.client.Do(req)
	g.Expect(err).NotTo(HaveOccurred(), "%s %s%s", method, c.base, path)
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s %s%s: %s", method, c.base, path, data)
	return data
}

// logServer logs how long the server took to be Ready.
func logServer(t *testing.T, server *embedopsv1.EmbeddingServer, began time.Time) {
	t.Helper()
	t.Logf("server %s Ready with %d replicas %s after it was applied (binding %s)",
		server.Name, server.Status.ReadyReplicas, time.Since(began).Round(time.Millisecond), server.Status.CacheBinding)
}

// report is an account of a server that is not Ready yet: its
// conditions, whether /info was answered, and its namespace's pods.
func report(t testing.TB, server *embedopsv1.EmbeddingServer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server %s/%s is not Ready and served (%v):", server.Namespace, server.Name, server.Status.Served != nil)
	for _, c := range server.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	pods := &corev1.PodList{}
	if err := node.Client.List(t.Context(), pods, client.InNamespace(server.Namespace)); err != nil {
		return b.String()
	}
	for _, pod := range pods.Items {
		fmt.Fprintf(&b, "\n  pod %s %s", pod.Name, pod.Status.Phase)
		for _, s := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "; %s ready=%v restarts=%d %s", s.Name, s.Ready, s.RestartCount, containerState(s.State))
		}
	}
	return b.String()
}

// containerState is a container state in a few words.
func containerState(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting " + s.Waiting.Reason + ": " + s.Waiting.Message
	case s.Terminated != nil:
		return fmt.Sprintf("terminated %d %s: %s", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Message)
	default:
		return "running"
	}
}
