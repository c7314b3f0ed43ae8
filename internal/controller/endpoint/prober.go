package endpoint

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PodNamespaceEnv names the controller's namespace, which config/manager
// sets from the downward API (fieldRef metadata.namespace).
const PodNamespaceEnv = "POD_NAMESPACE"

// DefaultProberLabels are the labels config/manager gives the
// controller's pods.
const DefaultProberLabels = "app.kubernetes.io/name=embedops,app.kubernetes.io/component=controller"

// Prober is the NetworkPolicy peer of the controller's own pods:
// those with podLabels (a "k=v,k=v" list) in namespace, which Kubernetes
// labels kubernetes.io/metadata.name=<namespace> (the NamespaceDefaultLabelName
// feature, on since 1.22). It is nil when namespace is empty: outside a
// cluster no pod peer names the controller.
func Prober(namespace, podLabels string) (*networkingv1.NetworkPolicyPeer, error) {
	if namespace == "" {
		return nil, nil
	}
	selected, err := labels.ConvertSelectorToLabelsMap(podLabels)
	if err != nil {
		return nil, fmt.Errorf("endpoint check pod labels %q: %w", podLabels, err)
	}
	if len(selected) == 0 {
		return nil, fmt.Errorf("endpoint check pod labels are empty: they would admit every pod of namespace %s", namespace)
	}
	return &networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: selected},
	}, nil
}
