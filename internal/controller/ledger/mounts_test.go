package ledger

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNamesReadsThePodsClaimVolumes(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "cache-0"}}},
	}}}
	for claim, want := range map[string]bool{"cache-0": true, "cache-1": false, "tmp": false} {
		if got := names(pod, claim); got != want {
			t.Errorf("names(%s) = %t, want %t", claim, got, want)
		}
	}
}
