package ledger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// claimUsers finds the pods that still mount a claim, from one uncached
// list of the namespace's pods made on first use: the informer cache may
// lag (after kube-apiserver restarts, client-go v0.37.2's reflector backs
// off for up to a minute: tools/cache/reflector.go), and a claim deleted
// while its pod runs loses the pod's data as soon as the pod ends. It follows kube-controller-manager's
// pvc-protection controller (kubernetes v1.37.2,
// pkg/controller/volume/pvcprotection/pvc_protection_controller.go:
// askAPIServer lists the namespace's pods live), and is stricter: a pod not
// scheduled yet counts too, since it is a replica waiting for that claim.
type claimUsers struct {
	reader    client.Reader
	namespace string
	pods      []corev1.Pod
	listed    bool
}

// of names a pod that mounts the claim, or "" when none does.
func (u *claimUsers) of(ctx context.Context, claim string) (string, error) {
	if !u.listed {
		var pods corev1.PodList
		if err := u.reader.List(ctx, &pods, client.InNamespace(u.namespace)); err != nil {
			return "", fmt.Errorf("listing the pods that may mount claim %s: %w", claim, err)
		}
		u.pods, u.listed = pods.Items, true
	}
	for i := range u.pods {
		if mounts(&u.pods[i], claim) {
			return u.pods[i].Name, nil
		}
	}
	return "", nil
}

// mounts reports whether a pod still holds a claim: it names the claim in a
// volume and has not ended. A pod ended when its phase is Succeeded or
// Failed (the kubelet stopped its containers for good) or when it is shut
// down: deleted with a zero grace period, which the kubelet sets once the
// volumes are unmounted, or force-deleted (pvcprotection's podIsShutDown).
func mounts(pod *corev1.Pod, claim string) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	grace := pod.DeletionGracePeriodSeconds
	if pod.DeletionTimestamp != nil && grace != nil && *grace == 0 {
		return false
	}
	for _, volume := range pod.Spec.Volumes {
		if volume.PersistentVolumeClaim != nil && volume.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}
