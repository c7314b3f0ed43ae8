package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// Binding is the ModelCacheBinding named name that records decision d,
// made by server, with its source: labelled with the server's UID (history is
// pruned per server) and the decision's base name (suffixed successors are
// found by it), protected by the cache-protection finalizer, and listing the
// claims of the server's current replicas.
func Binding(server *embedopsv1.EmbeddingServer, d *decision.Decision, name string, source embedopsv1.DecisionSource) *embedopsv1.ModelCacheBinding {
	binding := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  server.Namespace,
			Name:       name,
			Labels:     map[string]string{embedopsv1.ServerUIDLabel: string(server.UID), embedopsv1.BindingBaseLabel: decision.BindingName(d)},
			Finalizers: []string{embedopsv1.CacheProtectionFinalizer},
		},
		Spec: embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision, Source: source},
	}
	binding.Spec.Resources.PersistentVolumeClaimNames = decision.ClaimNamesOf(d, name, server.Name, server.GetReplicas())
	return binding
}

// SuccessorBinding is Binding for a decision that differs from
// predecessor's in retainFor alone: it supersedes predecessor and takes over
// its storage, the names the workload carries for it and every claim it
// lists, so the server's StatefulSet and pods stay as they are.
func SuccessorBinding(server *embedopsv1.EmbeddingServer, d *decision.Decision, name string, source embedopsv1.DecisionSource, predecessor *embedopsv1.ModelCacheBinding) *embedopsv1.ModelCacheBinding {
	binding := Binding(server, d, name, source)
	binding.Spec.Supersedes = predecessor.Name
	binding.Spec.Resources.StorageName = decision.StorageName(predecessor)
	if d.Decision.Mode == embedopsv1.CacheModePerReplica {
		binding.Spec.Resources.ClaimTemplateName = decision.ClaimTemplateNameFor(predecessor)
		binding.Spec.Resources.StatefulSetName = predecessor.Spec.Resources.StatefulSetName
	}
	binding.Spec.Resources.PersistentVolumeClaimNames = decision.InheritedClaimNames(
		predecessor.Spec.Resources.PersistentVolumeClaimNames, decision.ClaimNamesFor(binding, server.Name, server.GetReplicas()))
	return binding
}

// BesideStatefulSet records that a new PerReplica binding's claims are made
// by statefulSet, a StatefulSet started beside the one serving under the
// server's name, and lists its claims under that name.
func BesideStatefulSet(binding *embedopsv1.ModelCacheBinding, server *embedopsv1.EmbeddingServer, statefulSet string) {
	binding.Spec.Resources.StatefulSetName = statefulSet
	binding.Spec.Resources.PersistentVolumeClaimNames = decision.ClaimNamesFor(binding, server.Name, server.GetReplicas())
}
