package metrics

import (
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/embedops/embedops/test/harness"
)

// Names from config/rbac, before config/default's embedops- prefix.
const (
	controllerNamespace = "embedops-system"
	controllerAccount   = "controller"
	metricsReaderRole   = "metrics-reader"
)

// reconcileMetric is a metric every controller-runtime manager serves.
const reconcileMetric = "controller_runtime_reconcile_total"

func TestMetricsNeedAnAllowedServiceAccountToken(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	objects := applyConfigRBAC(t, g)
	g.Expect(objects).To(HaveKey("ClusterRole/" + metricsReaderRole))
	g.Expect(objects).To(HaveKey("ClusterRole/metrics-auth-role"))

	// The controller runs with the ServiceAccount config/rbac binds, so
	// its roles must suffice for TokenReviews and SubjectAccessReviews.
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(g, kubeconfig, serviceAccountToken(t.Context(), g, controllerNamespace, controllerAccount))
	binary, err := harness.BuildController(dir)
	g.Expect(err).NotTo(HaveOccurred())
	proc, err := harness.StartControllerSecureMetrics(t.Context(), binary, kubeconfig,
		"--endpoint-check=off", "--leader-election-namespace="+controllerNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := proc.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", proc.Logs())
		}
	})
	g.Expect(proc.MetricsURL).To(HavePrefix("https://"))

	namespace := harness.Namespace(t, env.Client)
	scraper := serviceAccountToken(t.Context(), g, namespace, "scraper")
	stranger := serviceAccountToken(t.Context(), g, namespace, "stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-" + namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: "scraper"}},
	}
	g.Expect(env.Client.Create(t.Context(), binding)).To(Succeed())

	// The metrics server starts listening after the readiness probe answers.
	g.Eventually(func() (answer, error) { return get(t, proc.MetricsURL, "") }).Should(HaveField("Status", http.StatusUnauthorized), "no token")
	// A token the TokenReview rejects with an error is answered 500
	// "Authentication failed" (controller-runtime pkg/metrics/filters/
	// filters.go): refused all the same, with no metrics in the answer.
	unknown := scrape(t, g, proc.MetricsURL, "not-a-token")
	g.Expect(unknown.Status).To(BeElementOf(http.StatusUnauthorized, http.StatusInternalServerError), "a token the API server does not know")
	g.Expect(unknown.Body).NotTo(ContainSubstring(reconcileMetric))
	forbidden := scrape(t, g, proc.MetricsURL, stranger)
	g.Expect(forbidden.Status).To(Equal(http.StatusForbidden), "a token not allowed to get /metrics")
	g.Expect(forbidden.Body).To(ContainSubstring("system:serviceaccount:" + namespace + ":stranger"))
	g.Eventually(func() int { return scrape(t, g, proc.MetricsURL, scraper).Status }).Should(Equal(http.StatusOK), "a metrics-reader token")
	// The metrics server answers before the controllers start: they wait
	// for the leader election lease, and controller-runtime creates the
	// reconcile counters when a controller starts (internal/controller
	// initMetrics), so the metric shows up a moment later.
	g.Eventually(func() string { return scrape(t, g, proc.MetricsURL, scraper).Body }).Should(ContainSubstring(reconcileMetric))

	plain := "http" + strings.TrimPrefix(proc.MetricsURL, "https")
	// Go's TLS server answers plain HTTP with 400 and closes the connection.
	overPlain, err := get(t, plain, scraper)
	g.Expect(err != nil || overPlain.Status == http.StatusBadRequest).To(BeTrue(), "plain HTTP is not served: %d %v", overPlain.Status, err)
	g.Expect(overPlain.Body).NotTo(ContainSubstring(reconcileMetric))
}

// answer is a scrape's outcome.
type answer struct {
	Status int
	Body   string
}

// scrape gets url with token as bearer (none when empty), trusting the
// controller's self-signed certificate as a ServiceMonitor with
// insecureSkipVerify does.
func scrape(t *testing.T, g *WithT, url, token string) answer {
	t.Helper()
	a, err := get(t, url, token)
	g.Expect(err).NotTo(HaveOccurred())
	return a
}

// get is scrape returning its error.
func get(t *testing.T, url, token string) (answer, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the controller's self-signed certificate
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Body: string(body)}, err
}
