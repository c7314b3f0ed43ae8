package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// maxStatefulSetName is the longest StatefulSet name whose pods still get
// their labels: the StatefulSet controller labels every pod with
// controller-revision-hash "<name>-<10 characters>" (kubernetes
// pkg/controller/history/controller_history.go, ControllerRevisionName),
// and a label value has at most 63 characters.
const maxStatefulSetName = 52

// rolloutSuffixLength is how many hex digits of the storage's digest a
// rollout StatefulSet's name carries.
const rolloutSuffixLength = 6

// StatefulSetNameFor is the StatefulSet whose claim templates make a
// PerReplica binding's claims: the one it records, else the server's
// (bindings made before storage changes rolled record none).
func StatefulSetNameFor(binding *embedopsv1.ModelCacheBinding, server string) string {
	if name := binding.Spec.Resources.StatefulSetName; name != "" {
		return name
	}
	return server
}

// RolloutStatefulSetName names the StatefulSet a storage change starts
// beside the one serving under the server's name: the server's name, cut to
// leave room, and six hex digits of the storage name's sha256. The same
// storage always gets the same name, so a reconcile that finds it again
// does not start a second one.
func RolloutStatefulSetName(server, storage string) string {
	sum := sha256.Sum256([]byte(storage))
	suffix := hex.EncodeToString(sum[:])[:rolloutSuffixLength]
	prefix := server[:min(len(server), maxStatefulSetName-rolloutSuffixLength-1)]
	return prefix + "-" + suffix
}

// rolloutNameTries is how many names RolloutStatefulSetNames offers.
const rolloutNameTries = 4

// RolloutStatefulSetNames are the names a storage change may give its
// StatefulSet, in order: RolloutStatefulSetName of the storage, then of the
// storage with a try number, for when another object holds a name.
func RolloutStatefulSetNames(server, storage string) []string {
	names := []string{RolloutStatefulSetName(server, storage)}
	for try := 2; try <= rolloutNameTries; try++ {
		names = append(names, RolloutStatefulSetName(server, fmt.Sprintf("%s#%d", storage, try)))
	}
	return names
}

// FreeRolloutName is the first of RolloutStatefulSetNames(server, storage)
// that usable accepts (free, or already the storage's own); an error when
// none is.
func FreeRolloutName(server, storage string, usable func(name string) (bool, error)) (string, error) {
	names := RolloutStatefulSetNames(server, storage)
	for _, name := range names {
		ok, err := usable(name)
		if err != nil || ok {
			return name, err
		}
	}
	return "", fmt.Errorf("every StatefulSet name for storage %s (%v) is taken by other objects", storage, names)
}

// WhyNewStorage says why decision next cannot be served from the storage
// of decision old, so the pods move to new volumes: the first part of the
// storage that differs. A smaller size is named as such: claims never
// shrink (k8s pkg/apis/core/validation, ValidatePersistentVolumeClaimUpdate:
// "field can not be less than previous value").
func WhyNewStorage(old, next *Decision) string {
	a, b := old.Decision, next.Decision
	switch {
	case old.Identity.Model != next.Identity.Model:
		return fmt.Sprintf("model %s replaces %s", next.Identity.Model, old.Identity.Model)
	case old.Identity.Revision != next.Identity.Revision:
		return fmt.Sprintf("revision %s replaces %s", next.Identity.Revision, old.Identity.Revision)
	case a.Mode != b.Mode:
		return fmt.Sprintf("cache mode %s replaces %s", b.Mode, a.Mode)
	case a.ExistingClaim != b.ExistingClaim:
		return "another existing claim"
	case a.StorageClassName != b.StorageClassName:
		return fmt.Sprintf("StorageClass %q replaces %q", b.StorageClassName, a.StorageClassName)
	case b.Size.Cmp(a.Size) < 0:
		return fmt.Sprintf("size %s is below %s, and a claim cannot shrink", b.Size.String(), a.Size.String())
	case b.Size.Cmp(a.Size) > 0:
		return fmt.Sprintf("size %s replaces %s, and the claims cannot grow in place: their StorageClass does not allow volume expansion, or another server uses them",
			b.Size.String(), a.Size.String())
	case old.Identity.Key != next.Identity.Key:
		return "the cache's sharing domain changed"
	default:
		return "access modes or reclaim policy changed"
	}
}

// MaxSurge is spec.rollout.maxSurge resolved against the server's replicas,
// a percentage rounded up as a Deployment's maxSurge is (kubernetes v1.37.2
// pkg/controller/deployment/util/deployment_util.go, ResolveFenceposts);
// set is false when the spec leaves it to the disruption budget.
func MaxSurge(server *embedopsv1.EmbeddingServer) (surge int32, set bool) {
	if server.Spec.Rollout == nil || server.Spec.Rollout.MaxSurge == nil {
		return 0, false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(server.Spec.Rollout.MaxSurge, int(server.GetReplicas()), true)
	if err != nil {
		return 0, false
	}
	return int32(max(n, 0)), true
}

// ReplacesInPlace reports whether the server's move to new storage stops
// an old pod before its successor starts (spec.rollout.maxSurge 0).
func ReplacesInPlace(server *embedopsv1.EmbeddingServer) bool {
	surge, set := MaxSurge(server)
	return set && surge == 0
}
