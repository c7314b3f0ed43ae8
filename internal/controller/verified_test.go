package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// A created child's digest, from the API server's JSON answer, is the one
// the cache gives it from the protobuf watch, where claim templates carry
// no apiVersion and kind; so a new server's next reconcile trusts it.
func TestCreatedDigestIsTheCachedDigest(t *testing.T) {
	g := NewWithT(t)
	scheme, err := NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	cached := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tei", ResourceVersion: "7"},
		Spec: appsv1.StatefulSetSpec{
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "cache"}}},
		},
		Status: appsv1.StatefulSetStatus{ReadyReplicas: 1},
	}
	answered := cached.DeepCopy()
	answered.ResourceVersion = "6"
	answered.Spec.VolumeClaimTemplates[0].TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(answered)
	g.Expect(err).NotTo(HaveOccurred())

	created, err := createdDigest(scheme, &unstructured.Unstructured{Object: content})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(childDigest(cached)).To(Equal(created))
}
