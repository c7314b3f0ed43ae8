package cli

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestDiffSizesDownloadsFromTheClustersBindings(t *testing.T) {
	g := NewWithT(t)
	env, kubeconfig := reconciledCluster(t)
	c := env.Client
	namespace := harness.Namespace(t, c)
	// A server elsewhere already caches the model the change adds.
	server := fixtures.EmbeddingServer(namespace, "cached", fixtures.WithModel("intfloat/multilingual-e5-small", "main"))
	g.Expect(c.Create(t.Context(), server)).To(Succeed())
	binding := boundBinding(t, g, c, server, "")
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(binding), binding)).To(Succeed())
		binding.Status.Realized = &embedopsv1.RealizedCache{Bytes: new(int64(3 << 20))}
		g.Expect(c.Status().Update(t.Context(), binding)).To(Succeed())
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	history := newDiffHistory(t)
	report := diffJSON(t, g, history, history.before, history.after, "--kubeconfig", kubeconfig, "--cluster=on")
	g.Expect(report.Sizes).To(Equal("bindings in the cluster"))
	g.Expect(report.Servers).To(ContainElement(And(HaveField("Server", "team/fresh"),
		HaveField("Caches", ConsistOf(HaveField("Download.BytesPerCopy", HaveValue(Equal(int64(3<<20)))))))))
	g.Expect(report.Summary.DownloadBytes).To(BeNil(), "rerank@v2 is cached nowhere")
	out, _, err := runDiffCLI(t, history, history.before, history.after, "--kubeconfig", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`(?m)^team/fresh\s+\+ create\s.*\s3\.0 MiB\s+no$`))
}
