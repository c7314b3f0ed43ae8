package chaos

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podSeen is what the recorder knows of a pod: the claims it mounts, the
// resourceVersion it was first seen at, and the one it was seen gone at (0
// while it exists).
type podSeen struct {
	name    string
	claims  []string
	firstRV uint64
	goneRV  uint64
}

// podObserver records which claims pods mount, and when, into its
// Recorder.
type podObserver struct{ r *Recorder }

func (o podObserver) observed(obj client.Object, rv uint64, deleted bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.seePod(pod, rv)
	if deleted {
		o.r.podGone(pod.UID, rv)
	}
}

func (o podObserver) listed(objs []client.Object, _, listRV uint64) {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.listed["pods"] = true
	present := map[types.UID]bool{}
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			present[pod.UID] = true
			o.r.seePod(pod, listRV)
		}
	}
	for uid := range o.r.pods {
		if !present[uid] {
			o.r.podGone(uid, listRV)
		}
	}
}

// seePod records a pod the first time it is seen.
func (r *Recorder) seePod(pod *corev1.Pod, rv uint64) {
	if _, ok := r.pods[pod.UID]; ok {
		return
	}
	var claims []string
	for _, volume := range pod.Spec.Volumes {
		if volume.PersistentVolumeClaim != nil {
			claims = append(claims, volume.PersistentVolumeClaim.ClaimName)
		}
	}
	r.pods[pod.UID] = &podSeen{name: pod.Name, claims: claims, firstRV: rv}
}

// podGone records a pod's end the first time it is seen gone.
func (r *Recorder) podGone(uid types.UID, rv uint64) {
	if seen, ok := r.pods[uid]; ok && seen.goneRV == 0 {
		seen.goneRV = rv
	}
}

// MountedClaimDeletions lists the claims marked for deletion while a pod
// that mounts them still existed (terminating or not): at the claim's
// deletion resourceVersion, the pod had been seen and was not seen gone
// yet. The kubelet's pvc-protection finalizer would keep such a claim until
// the pod ends, but the controller must never ask: the data belongs to a
// pod that may still be serving.
func (r *Recorder) MountedClaimDeletions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var violations []string
	for _, d := range r.deletions {
		for _, pod := range r.pods {
			if slices.Contains(pod.claims, d.Name) && pod.firstRV < d.RV && (pod.goneRV == 0 || pod.goneRV > d.RV) {
				violations = append(violations, fmt.Sprintf("claim %s deleted at resourceVersion %d while pod %s mounted it (seen from %d, gone at %d)",
					d.Name, d.RV, pod.name, pod.firstRV, pod.goneRV))
			}
		}
	}
	slices.Sort(violations)
	return violations
}
