package security

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
)

// tokenSecret names the Secret holding the test's token.
const tokenSecret = "hf-token"

// reconcileMetric is a metric every controller-runtime manager serves.
const reconcileMetric = "controller_runtime_reconcile_total"

func TestTokenNeverAppearsInWhatTheControllerWrites(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	token, apiKey := randomToken(t), randomToken(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tokenSecret, Namespace: namespace},
		StringData: map[string]string{"token": token, "api-key": apiKey},
	}
	g.Expect(cluster.Client.Create(t.Context(), secret)).To(Succeed())
	private := fixtures.EmbeddingServer(namespace, "private", fixtures.WithToken(tokenSecret, "token"), func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Env = []corev1.EnvVar{{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: tokenSecret}, Key: "api-key",
		}}}}
	})
	shared := fixtures.EmbeddingServer(namespace, "shared", fixtures.WithToken(tokenSecret, "token"), fixtures.WithCacheMode(embedopsv1.CacheModeShared))
	// A reference to a missing key makes the controller emit a Warning
	// about the Secret, so its own events are among those searched.
	wrongKey := fixtures.EmbeddingServer(namespace, "wrong-key", fixtures.WithToken(tokenSecret, "absent"))
	for _, server := range []*embedopsv1.EmbeddingServer{private, shared, wrongKey} {
		g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	}
	expectReady(t, private)
	expectReady(t, shared)
	expectCondition(t, client.ObjectKeyFromObject(wrongKey), embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.SecretNotFoundReason)

	secrets := []string{token, apiKey}
	expectAbsent(t, g, "the controller's log", controllerLog(g, namespace), secrets)
	expectAbsent(t, g, "the events", eventsIn(t, g, namespace), secrets)
	expectAbsent(t, g, "the servers and bindings", embedopsObjects(t, g, namespace), secrets)
	expectAbsent(t, g, "the children", childObjects(t, g, namespace), secrets)
	expectAbsent(t, g, "the metrics", metrics(t, g), secrets)
}

// expectAbsent checks that text, which must not be empty, holds none of
// the secrets, as written or base64-encoded (as a Secret's data is).
func expectAbsent(t *testing.T, g *WithT, what, text string, secrets []string) {
	t.Helper()
	g.Expect(text).NotTo(BeEmpty(), "%s: nothing to search", what)
	for _, secret := range secrets {
		g.Expect(text).NotTo(ContainSubstring(secret), "%s holds a token", what)
		g.Expect(text).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(secret))), "%s holds a base64-encoded token", what)
	}
}

// controllerLog is the controller's log, checked to cover the namespace.
func controllerLog(g *WithT, namespace string) string {
	log := controller.Logs()
	g.Expect(log).To(ContainSubstring(namespace), "the controller logged nothing about the test's servers")
	g.Expect(log).To(ContainSubstring(`"level":"debug"`), "the controller does not log at debug level")
	return log
}

// eventsIn are the namespace's events, checked to include the
// controller's Warning about the token Secret.
func eventsIn(t *testing.T, g *WithT, namespace string) string {
	t.Helper()
	var events corev1.EventList
	g.Expect(cluster.Client.List(t.Context(), &events, client.InNamespace(namespace))).To(Succeed())
	g.Expect(events.Items).To(ContainElement(SatisfyAll(
		HaveField("Reason", embedopsv1.SecretNotFoundReason),
		HaveField("Message", ContainSubstring(tokenSecret)),
	)), "the controller emitted no event about the token Secret")
	return jsonOf(t, events)
}

// embedopsObjects are the namespace's servers and bindings, whole,
// checked to name the token Secret.
func embedopsObjects(t *testing.T, g *WithT, namespace string) string {
	t.Helper()
	var servers embedopsv1.EmbeddingServerList
	var bindings embedopsv1.ModelCacheBindingList
	g.Expect(cluster.Client.List(t.Context(), &servers, client.InNamespace(namespace))).To(Succeed())
	g.Expect(cluster.Client.List(t.Context(), &bindings, client.InNamespace(namespace))).To(Succeed())
	g.Expect(bindings.Items).NotTo(BeEmpty())
	text := jsonOf(t, servers) + jsonOf(t, bindings)
	g.Expect(text).To(ContainSubstring(tokenSecret))
	return text
}

// childObjects are the namespace's StatefulSets, Jobs and pods, checked to
// read the token from its Secret.
func childObjects(t *testing.T, g *WithT, namespace string) string {
	t.Helper()
	var statefulSets appsv1.StatefulSetList
	var jobs batchv1.JobList
	var pods corev1.PodList
	for _, list := range []client.ObjectList{&statefulSets, &jobs, &pods} {
		g.Expect(cluster.Client.List(t.Context(), list, client.InNamespace(namespace))).To(Succeed())
	}
	g.Expect(pods.Items).NotTo(BeEmpty())
	text := jsonOf(t, statefulSets) + jsonOf(t, jobs) + jsonOf(t, pods)
	g.Expect(text).To(ContainSubstring(`"secretKeyRef":{"name":"` + tokenSecret + `","key":"token"}`))
	return text
}

// metrics is the controller's metrics page, checked to hold its
// reconcile counters.
func metrics(t *testing.T, g *WithT) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, controller.MetricsURL, nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(body)).To(ContainSubstring(reconcileMetric))
	return string(body)
}

// randomToken is a token no test or component could produce by chance.
func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "hf_" + strings.ToUpper(hex.EncodeToString(b))
}
