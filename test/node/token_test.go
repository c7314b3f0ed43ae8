//go:build linux

package node

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/harness"
)

// smallModel is the model of the servers the tests make: the minimal
// example's.
const smallModel = "BAAI/bge-small-en-v1.5"

// hubToken is the token the token test's hub requires (a placeholder, as
// examples/hf-token-secret.yaml's).
const hubToken = "hf_node_test_placeholder"

// TestServerWithTokenSecretStarts runs a server whose token comes from a
// Secret against a hub that refuses requests without it, with a cache the
// populator fills (the token reaches the populator) and with none (TEI
// downloads the model itself with the token). Before issue 24's fix TEI
// got HF_TOKEN and HF_API_TOKEN, which its command line refuses together
// (exit 2), and every such pod crash-looped.
func TestServerWithTokenSecretStarts(t *testing.T) {
	requireNode(t)
	t.Parallel()
	for _, mode := range []embedopsv1.CacheMode{embedopsv1.CacheModePerReplica, embedopsv1.CacheModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ns := harness.Namespace(t, node.Client)
			h := startHub(t, ns, hubToken, hubModel{ID: smallModel})
			g.Expect(hubStatusWithoutToken(t, ns)).To(Equal(http.StatusUnauthorized), "the hub requires the token")
			_, err := node.Clientset.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "hf-token"},
				StringData: map[string]string{"token": hubToken},
			}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			server := newServer("tokened", h, func(s *embedopsv1.EmbeddingServer) {
				s.Spec.Model.TokenSecretRef = &embedopsv1.SecretKeyRef{Name: "hf-token", Key: "token"}
				s.Spec.Cache.Mode = mode
			})
			began := time.Now()
			applyObject(t, ns, serverObject(t, server))
			got := waitServerReady(t, client.ObjectKeyFromObject(server))
			logServer(t, got, began)
			for _, pod := range serverPods(t, got) {
				tei := teiContainerStatus(&pod)
				g.Expect(tei.RestartCount).To(BeZero(), "pod %s's TEI never exited", pod.Name)
				g.Expect(envNames(&pod)).To(ContainElement("HF_TOKEN"))
				g.Expect(envNames(&pod)).NotTo(ContainElement("HF_API_TOKEN"))
			}
			revision := h.commits[smallModel]
			if mode == embedopsv1.CacheModeNone {
				revision = "main" // no populator records a commit: TEI runs the spec's revision
			}
			for _, pod := range serverPods(t, got) {
				g.Expect(podTEI(&pod, got.Spec.Port, "").info(t)).To(Equal(teiInfo{ModelID: smallModel, ModelSHA: revision}))
			}
		})
	}
}

// newServer is a one-replica server of smallModel downloading from h,
// changed by each modify.
func newServer(name string, h *hub, modify ...func(*embedopsv1.EmbeddingServer)) *embedopsv1.EmbeddingServer {
	server := &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		Spec: embedopsv1.EmbeddingServerSpec{
			Model: embedopsv1.ModelSpec{Name: smallModel},
			Env:   []corev1.EnvVar{{Name: "HF_ENDPOINT", Value: h.endpoint}},
		},
	}
	for _, m := range modify {
		m(server)
	}
	return server
}

// hubStatusWithoutToken asks the namespace's hub for the model's info
// without a token, at its pod's address.
func hubStatusWithoutToken(t *testing.T, ns string) int {
	t.Helper()
	pod, err := node.Clientset.CoreV1().Pods(ns).Get(t.Context(), hubName, metav1.GetOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("http://%s/api/models/%s", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(hubPort)), smallModel)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	resp, err := (&http.Client{Transport: &http.Transport{DialContext: node.Dial}}).Do(req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return resp.StatusCode
}

// teiContainerStatus is the status of the pod's TEI container.
func teiContainerStatus(pod *corev1.Pod) corev1.ContainerStatus {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == builder.ContainerName {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// envNames are the names of the TEI container's environment variables.
func envNames(pod *corev1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.Containers {
		if c.Name != builder.ContainerName {
			continue
		}
		for _, e := range c.Env {
			names = append(names, e.Name)
		}
	}
	return names
}
