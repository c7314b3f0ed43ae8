package decision

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Drift is a difference between a binding's record and the cluster. It is
// reported, never acted on: drift never authorises deleting data.
type Drift struct {
	// Reason is the ConfigurationDrift condition's reason and the event's.
	Reason string
	// Message says what differs.
	Message string
}

// StorageClass is what a binding compares with the StorageClass it recorded:
// nil means the class does not exist (any more).
type StorageClass struct {
	Provisioner string
	Parameters  map[string]string
}

// StorageClassDrift compares the recorded cluster facts with the
// StorageClass now (nil when it is gone); facts that were not recorded
// cannot drift.
func StorageClassDrift(binding *embedopsv1.ModelCacheBinding, class *StorageClass) *Drift {
	recorded := binding.Spec.Decision
	if recorded.Provisioner == "" && recorded.StorageClassParametersDigest == "" {
		return nil
	}
	if class == nil {
		return &Drift{embedopsv1.StorageClassDeletedReason, fmt.Sprintf(
			"StorageClass %q (provisioner %q) was deleted after the decision; the claims keep their volumes",
			displayClass(recorded.StorageClassName), recorded.Provisioner)}
	}
	parametersChanged := recorded.StorageClassParametersDigest != ParametersDigest(class.Parameters)
	if recorded.Provisioner != class.Provisioner || parametersChanged {
		return &Drift{embedopsv1.StorageClassDriftReason, fmt.Sprintf(
			"StorageClass %q changed after the decision: provisioner %q (recorded %q), parameters digest differs: %t",
			displayClass(recorded.StorageClassName), class.Provisioner, recorded.Provisioner, parametersChanged)}
	}
	return nil
}

// displayClass names the cluster default for an empty class name.
func displayClass(name string) string {
	if name == "" {
		return "(cluster default)"
	}
	return name
}

// ClaimSizeDrift reports claims whose requested size differs from the
// decision.
func ClaimSizeDrift(binding *embedopsv1.ModelCacheBinding, claims []corev1.PersistentVolumeClaim) *Drift {
	var resized []string
	for _, claim := range claims {
		requested, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if ok && requested.Cmp(binding.Spec.Decision.Size) != 0 {
			resized = append(resized, fmt.Sprintf("%s requests %s", claim.Name, requested.String()))
		}
	}
	if len(resized) == 0 {
		return nil
	}
	return &Drift{embedopsv1.ClaimResizedReason, fmt.Sprintf("claims differ from the decided size %s: %s",
		binding.Spec.Decision.Size.String(), strings.Join(resized, ", "))}
}
