package health

import (
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/resource"
)

func TestMetricsServiceReachesTheControllersHTTPSPort(t *testing.T) {
	g := NewWithT(t)
	byKind := map[string][]*resource.Resource{}
	for _, r := range render(t, "default") {
		byKind[r.GetKind()] = append(byKind[r.GetKind()], r)
	}
	deployment := decode[appsv1.Deployment](t, byKind["Deployment"])
	service := decode[corev1.Service](t, byKind["Service"])
	g.Expect(service.Name).To(Equal("embedops-controller-metrics-service"))
	g.Expect(labels.SelectorFromSet(service.Spec.Selector).Matches(labels.Set(deployment.Spec.Template.Labels))).To(BeTrue())
	g.Expect(service.Spec.Ports).To(HaveLen(1))
	port := service.Spec.Ports[0]
	g.Expect(port.Name).To(Equal("https"))
	containerPorts := map[string]int32{}
	for _, p := range deployment.Spec.Template.Spec.Containers[0].Ports {
		containerPorts[p.Name] = p.ContainerPort
	}
	g.Expect(containerPorts).To(HaveKeyWithValue(port.TargetPort.String(), port.Port))
}

func TestPrometheusMonitorsTheMetricsService(t *testing.T) {
	g := NewWithT(t)
	var service *corev1.Service
	for _, r := range render(t, "default") {
		if r.GetKind() == "Service" {
			service = decode[corev1.Service](t, []*resource.Resource{r})
		}
	}
	g.Expect(service).NotTo(BeNil())
	byKind := map[string]*unstructured.Unstructured{}
	for _, r := range render(t, "prometheus") {
		byKind[r.GetKind()] = &unstructured.Unstructured{Object: mapOf(t, r)}
	}
	g.Expect(byKind).To(HaveKey("ServiceMonitor"))
	g.Expect(byKind).To(HaveKey("PrometheusRule"))

	monitor := byKind["ServiceMonitor"]
	matchLabels, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	g.Expect(labels.SelectorFromSet(matchLabels).Matches(labels.Set(service.Labels))).To(BeTrue(), "the ServiceMonitor selects the metrics Service")
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	g.Expect(endpoints).To(ConsistOf(And(
		HaveKeyWithValue("port", service.Spec.Ports[0].Name),
		HaveKeyWithValue("scheme", "https"),
		HaveKeyWithValue("bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"),
	)))

	groups, _, _ := unstructured.NestedSlice(byKind["PrometheusRule"].Object, "spec", "groups")
	g.Expect(groups).To(HaveLen(1))
	rules := groups[0].(map[string]any)["rules"].([]any)
	alerts := map[string]string{}
	for _, rule := range rules {
		r := rule.(map[string]any)
		alerts[r["alert"].(string)] = r["expr"].(string)
	}
	g.Expect(alerts).To(HaveLen(4))
	// Every expression reads a metric the controller serves (README,
	// internal/controller/metrics*.go and controller-runtime's).
	served := regexp.MustCompile(`\b(gotk_reconcile_condition|embedops_server_condition|embedops_binding_phase|controller_runtime_reconcile_errors_total)\{`)
	for name, expr := range alerts {
		g.Expect(served.MatchString(expr)).To(BeTrue(), "%s: %s", name, expr)
	}
}
