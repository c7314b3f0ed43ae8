//go:build linux

package node

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// TestExistingClaimServesWithoutAHub fills a claim as a user would (a Job
// running `embedops populate` from the controller image against the hub),
// stops the hub, and serves from the claim as spec.cache.existingClaim
// with no HF_ENDPOINT and no token: the verify Job checks the claim
// offline, and the TEI stand-in, which looks files up as hf-hub does
// (refs/<revision>, then snapshots/<commit>, the hub only for a missing
// file), finds everything on the claim. An air-gapped cluster serves.
func TestExistingClaimServesWithoutAHub(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h := startHub(t, ns, "", hubModel{ID: smallModel})
	claim := volumeClaim("models")
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	_, err := node.Clientset.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), claim, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	fillClaim(t, ns, "models", h.endpoint)
	h.stop(t)

	server := newServer("air-gapped", h, func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Env = nil
		s.Spec.Cache.ExistingClaim = "models"
	})
	began := time.Now()
	applyObject(t, ns, serverObject(t, server))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	logServer(t, got, began)
	pods := serverPods(t, got)
	g.Expect(pods).To(HaveLen(1))
	g.Expect(podTEI(&pods[0], got.Spec.Port, "").embed(t, "served from the user's claim")).To(HaveLen(1))
	for _, e := range pods[0].Spec.Containers[0].Env {
		g.Expect(e.Name).NotTo(BeElementOf("HF_ENDPOINT", "HF_TOKEN"), "nothing points the server at a hub")
	}
	binding := bindingOf(t, got)
	g.Expect(binding.Spec.Decision.ExistingClaim).To(Equal("models"))
	g.Expect(binding.Spec.Resources.PersistentVolumeClaimNames).To(BeEmpty(), "the binding does not hold the user's claim")
}

// fillClaim runs `embedops populate` into the claim from the hub at
// endpoint, as the user's own Job, and waits until it succeeded.
func fillClaim(t *testing.T, ns, claim, endpoint string) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "fill-" + claim},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(cacheUID)), RunAsGroup: new(int64(cacheUID)), FSGroup: new(int64(cacheUID)), RunAsNonRoot: new(true)},
				Containers: []corev1.Container{{
					Name:            "populate",
					Image:           harness.ControllerImageRef,
					ImagePullPolicy: corev1.PullNever,
					Command:         []string{"/embedops", "populate", "--model", smallModel, "--revision", "main", "--dir", "/data"},
					Env:             []corev1.EnvVar{{Name: "HF_ENDPOINT", Value: endpoint}},
					VolumeMounts:    []corev1.VolumeMount{{Name: "models", MountPath: "/data"}},
					SecurityContext: restricted(),
				}},
				Volumes: []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
				}}},
			}},
		},
	}
	_, err := node.Clientset.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Eventually(func(g Gomega) {
		got, err := node.Clientset.BatchV1().Jobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status.Failed).To(BeZero(), "the populate Job failed")
		g.Expect(got.Status.Succeeded).To(Equal(int32(1)))
	}).WithTimeout(serverTimeout).WithPolling(time.Second).Should(Succeed())
}
