package ledger

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMountsFollowsThePodsLife(t *testing.T) {
	zero, thirty := int64(0), int64(30)
	deleted := metav1.Now()
	cases := []struct {
		name  string
		edit  func(*corev1.Pod)
		claim string
		want  bool
	}{
		{"a pending pod not scheduled yet", func(*corev1.Pod) {}, "cache-0", true},
		{"a running pod", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, "cache-0", true},
		{"a pod naming another claim", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, "cache-1", false},
		{"a terminating pod", func(p *corev1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &deleted, &thirty }, "cache-0", true},
		{"a pod the kubelet shut down", func(p *corev1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &deleted, &zero }, "cache-0", false},
		{"a succeeded pod", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, "cache-0", false},
		{"a failed pod", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, "cache-0", false},
	}
	for _, c := range cases {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "cache", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "cache-0"}}},
		}}}
		c.edit(pod)
		if got := mounts(pod, c.claim); got != c.want {
			t.Errorf("%s: mounts(%s) = %t, want %t", c.name, c.claim, got, c.want)
		}
	}
}
