package e2e

import (
	"bytes"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/cli"
)

// TestTraceFollowsAServerToItsCommit: server -> binding -> claim -> volume
// -> declared source -> commit, as `embedops trace` prints it.
func TestTraceFollowsAServerToItsCommit(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	commit := strings.Repeat("ab", 20)
	server := newServer(namespace, "traced", nil)
	server.Annotations = map[string]string{
		embedopsv1.SourceRevisionAnnotation:   "main@sha1:" + commit,
		embedopsv1.SourceRepositoryAnnotation: "http://127.0.0.1/models.git",
		embedopsv1.SourcePathAnnotation:       "apps",
	}
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	ready := expectReady(t, client.ObjectKeyFromObject(server), metav1.ConditionTrue, embedopsv1.AvailableReason)
	g.Expect(ready.Status.CacheBinding).NotTo(BeEmpty())

	var out bytes.Buffer
	g.Eventually(func(g Gomega) {
		out.Reset()
		root := cli.NewRootCommand()
		root.SetArgs([]string{"trace", namespace + "/traced", "--kubeconfig", cluster.Kubeconfig})
		root.SetOut(&out)
		g.Expect(root.Execute()).To(Succeed())
		g.Expect(out.String()).To(ContainSubstring("ModelCacheBinding " + ready.Status.CacheBinding + "  Active, in use"))
		g.Expect(out.String()).To(MatchRegexp(`claim \S+-traced-0  Bound  volume pvc-`))
	}).WithTimeout(settle).Should(Succeed())
	g.Expect(out.String()).To(ContainSubstring("source Declared  revision main@sha1:" + commit))
	g.Expect(out.String()).To(ContainSubstring("commit " + commit + " in http://127.0.0.1/models.git at apps"))
}
