package builder_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/internal/builder"
)

// TestPodMonitorExampleScrapesTEI checks config/prometheus's PodMonitor
// against what the builder generates: its selector selects a server's pods
// and its port is the TEI container's metrics port.
func TestPodMonitorExampleScrapesTEI(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "prometheus", "tei-podmonitor.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var monitor struct {
		Kind string `json:"kind"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port string `json:"port"`
				Path string `json:"path"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	g.Expect(yaml.Unmarshal(data, &monitor)).To(Succeed())
	g.Expect(monitor.Kind).To(Equal("PodMonitor"))

	sts, err := builder.StatefulSet(server("s"), nil, builder.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	for k, v := range monitor.Spec.Selector.MatchLabels {
		g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
	}
	g.Expect(monitor.Spec.Selector.MatchLabels).NotTo(BeEmpty())
	g.Expect(monitor.Spec.Endpoints).To(HaveLen(1))
	g.Expect(monitor.Spec.Endpoints[0].Port).To(Equal(builder.MetricsPortName))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Ports).To(ContainElement(HaveField("Name", builder.MetricsPortName)))
}
