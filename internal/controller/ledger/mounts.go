package ledger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// claimUsers finds the pods that name a claim, from one uncached list of
// the namespace's pods made on first use. The informer cache may lag:
// after kube-apiserver restarts, client-go v0.37.2's reflector backs off
// for up to a minute (tools/cache/reflector.go), and a claim deleted while
// its pod runs loses the pod's data as soon as the pod ends.
//
// Every pod that names a claim in a volume holds it, whatever its phase,
// as for kube-controller-manager's pvc-protection controller (kubernetes
// v1.37.2, pkg/controller/volume/pvcprotection/pvc_protection_controller.go:
// askAPIServer lists the namespace's pods live, and podUsesPVCForDeletion
// keeps a claim any scheduled pod names, finished or not), so a claim
// deleted earlier would only stay Terminating. A pod not scheduled yet
// holds it too, which pvc-protection does not: here it is a replica waiting
// for that claim.
type claimUsers struct {
	reader    client.Reader
	namespace string
	pods      []corev1.Pod
	listed    bool
}

// of names a pod that names the claim, or "" when none does.
func (u *claimUsers) of(ctx context.Context, claim string) (string, error) {
	if !u.listed {
		var pods corev1.PodList
		if err := u.reader.List(ctx, &pods, client.InNamespace(u.namespace)); err != nil {
			return "", fmt.Errorf("listing the pods that may mount claim %s: %w", claim, err)
		}
		u.pods, u.listed = pods.Items, true
	}
	for i := range u.pods {
		if names(&u.pods[i], claim) {
			return u.pods[i].Name, nil
		}
	}
	return "", nil
}

// names reports whether a pod names the claim in one of its volumes.
func names(pod *corev1.Pod, claim string) bool {
	for _, volume := range pod.Spec.Volumes {
		if volume.PersistentVolumeClaim != nil && volume.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}
