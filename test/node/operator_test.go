//go:build linux

package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/controller/watch"
	"github.com/embedops/embedops/test/harness"
)

// metricsReader is config/rbac's ClusterRole allowed to get /metrics,
// under config/default's namePrefix.
const metricsReader = "embedops-metrics-reader"

// installedControllerTag is the controller image's tag the tests install:
// config/manager's own, so config/default is installed as shipped. The
// populate init container and Job pull the same image IfNotPresent (a
// :latest image defaulted to Always needed a registry until c1427dc).
const installedControllerTag = "latest"

// installedControllerImage is the controller image the tests install.
var installedControllerImage = strings.Split(harness.ControllerImageRef, ":")[0] + ":" + installedControllerTag

// operatorOverlay writes the kustomization the tests install: config/default
// with the controller image's tag set, as the README tells a user to.
func operatorOverlay(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name, _, _ := strings.Cut(installedControllerImage, ":")
	return harness.WriteOperatorOverlay(dir, name, installedControllerTag)
}

// TestOperatorRunsAsInstalled checks issue 24's "operator installed as a
// user installs it": the controller runs in-cluster from the imported
// image under its own ServiceAccount, holds the leader lease, and serves
// metrics over HTTPS only to tokens its metrics-reader ClusterRole allows.
func TestOperatorRunsAsInstalled(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := t.Context()
	pod := controllerPod(t)
	g.Expect(pod.Spec.ServiceAccountName).To(Equal(harness.OperatorServiceAccount))
	g.Expect(pod.Spec.Containers[0].Image).To(Equal(installedControllerImage))

	lease := &coordinationv1.Lease{}
	g.Expect(node.Client.Get(ctx, client.ObjectKey{Namespace: harness.OperatorNamespace, Name: watch.LeaderElectionID}, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	g.Expect(*lease.Spec.HolderIdentity).To(HavePrefix(pod.Name), "the lease's holder is the controller pod")

	url := fmt.Sprintf("https://%s/metrics", net.JoinHostPort(pod.Status.PodIP, "8443"))
	status, _ := getMetrics(t, url, "")
	g.Expect(status).To(Equal(http.StatusUnauthorized), "without a token")
	status, body := getMetrics(t, url, metricsToken(t))
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
}

// controllerPod is the running controller's pod.
func controllerPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	NewWithT(t).Expect(node.Client.List(t.Context(), pods, client.InNamespace(harness.OperatorNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "controller"})).To(Succeed())
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no ready controller pod in %s: %d pods", harness.OperatorNamespace, len(pods.Items))
	return nil
}

// metricsToken is a token of a ServiceAccount bound to metricsReader, as a
// Prometheus scraping the controller has.
func metricsToken(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns := harness.Namespace(t, node.Client)
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	g.Expect(node.Client.Create(ctx, account)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: account.Name}},
	}
	g.Expect(node.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = node.Client.Delete(context.Background(), binding) })
	token, err := node.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, account.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return token.Status.Token
}

// getMetrics GETs the controller's metrics inside the node's namespace,
// with token as bearer when not empty. The certificate is self-signed
// (no --metrics-cert-dir), so it is not verified.
func getMetrics(t *testing.T, url, token string) (int, string) {
	t.Helper()
	g := NewWithT(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	httpClient := &http.Client{Transport: &http.Transport{
		DialContext:     node.Dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the controller's self-signed certificate
	}}
	resp, err := httpClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}
