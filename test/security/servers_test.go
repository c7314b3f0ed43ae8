package security

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// settle bounds how long a server may take to reach a state on a busy
// 2-core machine.
const settle = 3 * time.Minute

// logTail is how many lines of the controller's log a failure shows.
const logTail = 40

// expectCondition waits until the server's condition has status and
// reason, and returns the server as then read.
func expectCondition(t *testing.T, key client.ObjectKey, condition string, status metav1.ConditionStatus, reason string) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), key, server)).To(Succeed())
		got := conditions.Get(server, condition)
		g.Expect(got).NotTo(BeNil(), "%s has no %s condition", key, condition)
		g.Expect(got.Status).To(Equal(status), "%s is %s/%s: %s", condition, got.Status, got.Reason, got.Message)
		g.Expect(got.Reason).To(Equal(reason), "%s is %s/%s: %s", condition, got.Status, got.Reason, got.Message)
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed(), "controller log:\n%s", controllerLogTail())
	return server
}

// expectReady waits until the server is Ready and its generation observed.
func expectReady(t *testing.T, server *embedopsv1.EmbeddingServer) *embedopsv1.EmbeddingServer {
	t.Helper()
	key := client.ObjectKeyFromObject(server)
	ready := expectCondition(t, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), key, ready)).To(Succeed())
		g.Expect(ready.Status.ObservedGeneration).To(Equal(ready.Generation))
	}).WithTimeout(settle).WithPolling(time.Second).Should(Succeed())
	return ready
}

// controllerLogTail is the end of the controller's log.
func controllerLogTail() string {
	lines := strings.Split(strings.TrimRight(controller.Logs(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-logTail):], "\n")
}

// jsonOf is obj as JSON, for searching.
func jsonOf(t *testing.T, obj any) string {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
