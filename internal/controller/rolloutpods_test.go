package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/embedops/embedops/internal/decision"
)

// An old StatefulSet is read ordinal by ordinal from the pods it
// controls; a pod its status counts ready that the cache does not show
// yet is taken as ready, never as one that is down.
func TestOldReplicasOfReadsEachOrdinal(t *testing.T) {
	const (
		R = decision.PodReady
		U = decision.PodUnready
		M = decision.PodMissing
		T = decision.PodTerminating
	)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "tei", UID: "sts"},
		Spec:       appsv1.StatefulSetSpec{Replicas: new(int32(3)), Ordinals: &appsv1.StatefulSetOrdinals{Start: 1}},
	}
	pod := func(name string, owner types.UID, ready, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: "tei", UID: owner, Controller: new(true)}}}}
		status := map[bool]corev1.ConditionStatus{true: corev1.ConditionTrue, false: corev1.ConditionFalse}[ready]
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if deleting {
			p.DeletionTimestamp = new(metav1.Now())
		}
		return p
	}
	cases := []struct {
		name        string
		pods        []corev1.Pod
		statusReady int32
		want        []decision.PodState
	}{
		{"every state, from ordinals.start", []corev1.Pod{pod("tei-1", "sts", true, false), pod("tei-2", "sts", false, false), pod("tei-3", "sts", true, true)}, 1,
			[]decision.PodState{R, U, T}},
		{"a missing ordinal stays missing when the status agrees", []corev1.Pod{pod("tei-1", "sts", true, false), pod("tei-3", "sts", true, false)}, 2,
			[]decision.PodState{R, M, R}},
		{"pods the cache does not show yet count as the status says", nil, 2,
			[]decision.PodState{R, R, M}},
		{"a pod below ordinals.start or of another owner is not the set's", []corev1.Pod{pod("tei-0", "sts", true, false), pod("tei-2", "other", true, false)}, 0,
			[]decision.PodState{M, M, M}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := sts.DeepCopy()
			set.Status.ReadyReplicas = tc.statusReady
			got := oldReplicasOf(set, tc.pods)
			NewWithT(t).Expect(got).To(Equal(decision.OldReplicas{Name: "tei", Start: 1, Pods: tc.want}))
		})
	}
}
