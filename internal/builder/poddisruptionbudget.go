package builder

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// MinReplicasForDisruptionBudget is the fewest replicas a server has a
// PodDisruptionBudget at: with one replica a budget either blocks every node
// drain or allows the only pod to go, so none is made.
const MinReplicasForDisruptionBudget = 2

// defaultMaxUnavailable is the budget without spec.disruptionBudget: a drain
// takes down one replica at a time.
var defaultMaxUnavailable = intstr.FromInt32(1)

// PodDisruptionBudget returns the PodDisruptionBudget "<name>" over the
// server's pods, with spec.disruptionBudget's limit or maxUnavailable: 1,
// and nil when the server runs fewer than MinReplicasForDisruptionBudget
// replicas.
func PodDisruptionBudget(server *embedopsv1.EmbeddingServer) *policyv1.PodDisruptionBudget {
	if server.GetReplicas() < MinReplicasForDisruptionBudget {
		return nil
	}
	spec := policyv1.PodDisruptionBudgetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: SelectorLabels(server)},
	}
	switch budget := server.Spec.DisruptionBudget; {
	case budget != nil && budget.MinAvailable != nil:
		spec.MinAvailable = new(*budget.MinAvailable)
	case budget != nil && budget.MaxUnavailable != nil:
		spec.MaxUnavailable = new(*budget.MaxUnavailable)
	default:
		spec.MaxUnavailable = new(defaultMaxUnavailable)
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(server, server.Name),
		Spec:       spec,
	}
}

// AllowedUnavailable is how many of the server's replicas its disruption
// budget lets be unavailable at once, scaled against spec.replicas and
// rounded as the disruption controller rounds (k8s
// pkg/controller/disruption/disruption.go, getExpectedScale and
// GetScaledValueFromIntOrPercent rounding up); 0 without a budget or with
// a value that does not parse.
func AllowedUnavailable(server *embedopsv1.EmbeddingServer) int32 {
	budget := PodDisruptionBudget(server)
	if budget == nil {
		return 0
	}
	replicas := int(server.GetReplicas())
	if budget.Spec.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(budget.Spec.MaxUnavailable, replicas, true)
		if err != nil {
			return 0
		}
		return int32(max(n, 0))
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(budget.Spec.MinAvailable, replicas, true)
	if err != nil {
		return 0
	}
	return int32(max(replicas-n, 0))
}
