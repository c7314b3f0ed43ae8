package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// headlessServiceSuffix ends the name of a server's headless Service.
const headlessServiceSuffix = "-pods"

// HeadlessServiceName returns the name of the headless Service that governs
// the server's StatefulSet: "<name>-pods".
func HeadlessServiceName(server *embedopsv1.EmbeddingServer) string {
	return server.Name + headlessServiceSuffix
}

// Service returns the ClusterIP Service "<name>" that clients call; its port
// "http" targets the container port "http", its port "metrics" TEI's
// Prometheus listener.
func Service(server *embedopsv1.EmbeddingServer) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   serviceTypeMeta(),
		ObjectMeta: objectMeta(server, server.Name),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: SelectorLabels(server),
			Ports:    servicePorts(server),
		},
	}
}

// HeadlessService returns the headless Service "<name>-pods" named by the
// StatefulSet's serviceName. It publishes pods before they are ready, so each
// pod has a stable DNS name while its model downloads.
func HeadlessService(server *embedopsv1.EmbeddingServer) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   serviceTypeMeta(),
		ObjectMeta: objectMeta(server, HeadlessServiceName(server)),
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(server),
			Ports:                    servicePorts(server),
		},
	}
}

func serviceTypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Service"}
}

// servicePorts are "http" first, then TEI's "metrics" port for a
// ServiceMonitor, when the container has one.
func servicePorts(server *embedopsv1.EmbeddingServer) []corev1.ServicePort {
	ports := []corev1.ServicePort{{
		Name:       PortName,
		Protocol:   corev1.ProtocolTCP,
		Port:       port(server),
		TargetPort: intstr.FromString(PortName),
	}}
	if metrics := metricsPort(server); metrics != port(server) {
		ports = append(ports, corev1.ServicePort{
			Name:       MetricsPortName,
			Protocol:   corev1.ProtocolTCP,
			Port:       metrics,
			TargetPort: intstr.FromString(MetricsPortName),
		})
	}
	return ports
}

// objectMeta is the metadata every child shares.
func objectMeta(server *embedopsv1.EmbeddingServer, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: server.Namespace,
		Labels:    Labels(server),
	}
}
