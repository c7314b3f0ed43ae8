package harness

import (
	"context"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A component that exits while the cluster starts is started again: here
// kube-controller-manager, without which no namespace gets its default
// ServiceAccount.
func TestSupervisedStartsAnExitedComponentAgain(t *testing.T) {
	g := NewWithT(t)
	cluster, err := StartCluster(t.Context(), ClusterOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cluster.ComponentLogs(40))
		}
		g.Expect(cluster.Stop()).To(Succeed())
	})

	g.Expect(cluster.StopComponent(t.Context(), "kube-controller-manager", syscall.SIGKILL)).To(Succeed())
	g.Expect(cluster.StoppedComponents()).To(ConsistOf("kube-controller-manager"))
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "supervised-"}}
	g.Expect(cluster.Client.Create(t.Context(), namespace)).To(Succeed())

	ctx, cancel := context.WithTimeout(t.Context(), namespaceTimeout)
	defer cancel()
	g.Expect(cluster.poll(ctx, "the default ServiceAccount", cluster.supervised(cluster.serviceAccountExists(namespace.Name)))).To(Succeed())
	g.Expect(cluster.StoppedComponents()).To(BeEmpty())
}
