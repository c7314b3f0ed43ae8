package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/metrics"
	"github.com/embedops/embedops/test/fixtures"
)

// seriesIn gathers collector's series and returns the label sets of metric
// name in namespace.
func seriesIn(g Gomega, collector prometheus.Collector, name, namespace string) []map[string]string {
	registry := prometheus.NewRegistry()
	g.Expect(registry.Register(collector)).To(Succeed())
	families, err := registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var series []map[string]string
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, metric := range family.GetMetric() {
			g.Expect(family.GetType()).To(Equal(dto.MetricType_GAUGE))
			g.Expect(metric.GetGauge().GetValue()).To(Equal(1.0))
			labels := map[string]string{}
			for _, pair := range metric.GetLabel() {
				labels[pair.GetName()] = pair.GetValue()
			}
			if labels["namespace"] == namespace {
				series = append(series, labels)
			}
		}
	}
	return series
}

func TestStateMetricsReportConditionsAndPhases(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	collector := &metrics.StateCollector{}
	g.Expect(seriesIn(g, collector, "embedops_server_condition", namespace)).To(BeEmpty(), "no reader, no series")
	collector.Use(env.Client)

	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.InitializingReason)
	g.Eventually(func(g Gomega) {
		g.Expect(seriesIn(g, collector, "embedops_server_condition", namespace)).To(ContainElement(map[string]string{
			"namespace": namespace, "name": "tei", "type": embedopsv1.ReadyCondition, "status": "False", "reason": embedopsv1.InitializingReason,
		}))
		phases := seriesIn(g, collector, "embedops_binding_phase", namespace)
		g.Expect(phases).To(HaveLen(1))
		g.Expect(phases[0]).To(HaveKeyWithValue("phase", string(embedopsv1.BindingActive)))
	}).Should(Succeed())

	markStatefulSetReady(t, g, key)
	g.Eventually(func(g Gomega) {
		series := seriesIn(g, collector, "embedops_server_condition", namespace)
		g.Expect(series).To(ContainElement(HaveKeyWithValue("reason", embedopsv1.AvailableReason)))
		g.Expect(series).NotTo(ContainElement(HaveKeyWithValue("reason", embedopsv1.InitializingReason)), "only current conditions")
	}).Should(Succeed())
}
