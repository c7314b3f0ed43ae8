package controller

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/embedops/embedops/internal/decision"
)

// oldReplicasOf is an old StatefulSet of a storage change ordinal by
// ordinal, from the observed pods it controls: pod <name>-<ordinal>
// (kubernetes v1.37.2 pkg/controller/statefulset/stateful_set_utils.go,
// getPodName) for each ordinal from spec.ordinals.start.
func oldReplicasOf(sts *appsv1.StatefulSet, pods []corev1.Pod) decision.OldReplicas {
	set := decision.OldReplicas{Name: sts.Name, Start: startOrdinalOf(sts)}
	byOrdinal := podsByOrdinal(sts, pods)
	for ordinal := set.Start; ordinal < set.Start+replicasOf(sts); ordinal++ {
		set.Pods = append(set.Pods, podStateOf(byOrdinal[ordinal]))
	}
	countUnseenReady(&set, sts.Status.ReadyReplicas)
	return set
}

// countUnseenReady takes missing ordinals as ready, lowest first, while
// the StatefulSet's status counts more ready pods than the cache shows:
// the cache may show the status before the pods, and a pod that may serve
// is never taken for one that is down.
func countUnseenReady(set *decision.OldReplicas, statusReady int32) {
	seen := int32(0)
	for _, state := range set.Pods {
		if state == decision.PodReady {
			seen++
		}
	}
	for i := range set.Pods {
		if seen >= statusReady {
			return
		}
		if set.Pods[i] == decision.PodMissing {
			set.Pods[i] = decision.PodReady
			seen++
		}
	}
}

// startOrdinalOf is spec.ordinals.start, 0 when unset.
func startOrdinalOf(sts *appsv1.StatefulSet) int32 {
	if sts.Spec.Ordinals == nil {
		return 0
	}
	return sts.Spec.Ordinals.Start
}

// podsByOrdinal are the pods sts controls, by the ordinal their name ends
// with.
func podsByOrdinal(sts *appsv1.StatefulSet, pods []corev1.Pod) map[int32]*corev1.Pod {
	byOrdinal := map[int32]*corev1.Pod{}
	for i := range pods {
		owner := metav1.GetControllerOfNoCopy(&pods[i])
		if owner == nil || owner.UID != sts.UID {
			continue
		}
		suffix, ok := strings.CutPrefix(pods[i].Name, sts.Name+"-")
		ordinal, err := strconv.ParseInt(suffix, 10, 32)
		if ok && err == nil {
			byOrdinal[int32(ordinal)] = &pods[i]
		}
	}
	return byOrdinal
}

// podStateOf is what a pod says of its ordinal: ready as the StatefulSet
// controller counts readyReplicas (the Ready condition True,
// k8s.io/kubectl/pkg/util/podutils IsPodReady) and not terminating.
func podStateOf(pod *corev1.Pod) decision.PodState {
	switch {
	case pod == nil:
		return decision.PodMissing
	case !pod.DeletionTimestamp.IsZero():
		return decision.PodTerminating
	case podIsReady(pod):
		return decision.PodReady
	}
	return decision.PodUnready
}

// podIsReady reports whether the pod's Ready condition is True.
func podIsReady(pod *corev1.Pod) bool {
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodReady {
			return condition.Status == corev1.ConditionTrue
		}
	}
	return false
}
