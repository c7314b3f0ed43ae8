package builder

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// SharedClaim is the ReadWriteMany claim name of a Shared binding,
// controlled by the binding and labelled with its storage name, so the
// controller's cache sees it and the binding's Ready follows it.
func SharedClaim(binding *embedopsv1.ModelCacheBinding, name string) *corev1.PersistentVolumeClaim {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: binding.Namespace,
			Name:      name,
			Labels: map[string]string{
				embedopsv1.NameLabel:         binding.Name,
				embedopsv1.NamespaceLabel:    binding.Namespace,
				embedopsv1.CacheBindingLabel: decision.StorageName(binding),
			},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(binding, embedopsv1.GroupVersion.WithKind(embedopsv1.ModelCacheBindingKind)),
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: slices.Clone(binding.Spec.Decision.AccessModes),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: binding.Spec.Decision.Size.DeepCopy()},
			},
		},
	}
	if class := binding.Spec.Decision.StorageClassName; class != "" {
		claim.Spec.StorageClassName = &class
	}
	return claim
}
