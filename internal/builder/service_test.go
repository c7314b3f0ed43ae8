package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func TestServices(t *testing.T) {
	cases := []struct {
		name               string
		build              func(*embedopsv1.EmbeddingServer) *corev1.Service
		server             *embedopsv1.EmbeddingServer
		wantName           string
		wantClusterIP      string
		wantNotReady       bool
		wantPort           int32
		governsStatefulSet bool
	}{
		{"service", builder.Service, server("minimal"), "minimal", "", false, 8080, false},
		{"service on another port", builder.Service, server("s", fixtures.WithPort(3000)), "s", "", false, 3000, false},
		{"headless service", builder.HeadlessService, server("minimal"), "minimal-pods", "None", true, 8080, true},
		{"headless service on another port", builder.HeadlessService, server("s", fixtures.WithPort(3000)), "s-pods", "None", true, 3000, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			svc := tc.build(tc.server)
			g.Expect(svc.APIVersion).To(Equal("v1"))
			g.Expect(svc.Kind).To(Equal("Service"))
			g.Expect(svc.Name).To(Equal(tc.wantName))
			g.Expect(svc.Namespace).To(Equal(testNamespace))
			g.Expect(svc.OwnerReferences).To(BeEmpty())
			g.Expect(svc.Labels).To(Equal(builder.Labels(tc.server)))
			g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
			g.Expect(svc.Spec.ClusterIP).To(Equal(tc.wantClusterIP))
			g.Expect(svc.Spec.PublishNotReadyAddresses).To(Equal(tc.wantNotReady))
			g.Expect(svc.Spec.Selector).To(Equal(builder.SelectorLabels(tc.server)))
			g.Expect(svc.Spec.Ports).To(Equal([]corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: tc.wantPort, TargetPort: intstr.FromString("http")},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9000, TargetPort: intstr.FromString("metrics")},
			}))
			if tc.governsStatefulSet {
				sts, err := builder.StatefulSet(tc.server, nil, builder.Facts{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(sts.Spec.ServiceName).To(Equal(svc.Name))
				g.Expect(builder.HeadlessServiceName(tc.server)).To(Equal(svc.Name))
			}
		})
	}
}

func TestMetricsPortFollowsTEIsSettings(t *testing.T) {
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
		want   []int32
	}{
		{"default", server("s"), []int32{8080, 9000}},
		{"PROMETHEUS_PORT", server("s", fixtures.WithEnv(corev1.EnvVar{Name: "PROMETHEUS_PORT", Value: "9100"})), []int32{8080, 9100}},
		{"--prometheus-port wins over the variable", server("s", fixtures.WithEnv(corev1.EnvVar{Name: "PROMETHEUS_PORT", Value: "9100"}),
			fixtures.WithArgs("--prometheus-port=9200")), []int32{8080, 9200}},
		{"--prometheus-port as two arguments", server("s", fixtures.WithArgs("--prometheus-port", "9300")), []int32{8080, 9300}},
		{"not a port", server("s", fixtures.WithArgs("--prometheus-port=x")), []int32{8080, 9000}},
		{"the http port serves /metrics too", server("s", fixtures.WithPort(9000)), []int32{9000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(tc.server, nil, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			var container, service []int32
			for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
				container = append(container, p.ContainerPort)
			}
			for _, p := range builder.Service(tc.server).Spec.Ports {
				service = append(service, p.Port)
			}
			g.Expect(container).To(Equal(tc.want))
			g.Expect(service).To(Equal(tc.want))
		})
	}
}
