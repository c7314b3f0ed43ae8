//go:build linux

package node

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/embedops/embedops/test/harness"
)

// podTimeout bounds waiting for a pod on 2 busy cores; pods are Ready in
// seconds here (REAL-NODE.md: 2-3 s).
const podTimeout = 3 * time.Minute

// Identities of the volume test: the pod runs as user 1000 and the volume
// is handed to group 2000 through fsGroup.
const (
	testUser    = 1000
	testFSGroup = 2000
)

// TestPodWritesItsVolumeThroughFSGroup runs a pod as the workload's pods
// run: an init container writing a Secret's value to a CSI
// PersistentVolume (the harness's driver, which clones and snapshots) as
// uid 1000 (writable through fsGroup only), its
// termination message, and a server behind a readiness probe that is Ready
// once the file is there.
func TestPodWritesItsVolumeThroughFSGroup(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := harness.Namespace(t, node.Client)
	cs := node.Clientset.CoreV1()

	_, err := cs.Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "greeting"},
		StringData: map[string]string{"content": "placeholder greeting"},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.PersistentVolumeClaims(ns).Create(ctx, volumeClaim("data"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	began := time.Now()
	_, err = cs.Pods(ns).Create(ctx, writerPod("writer", "data", "greeting"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	pod := waitForPod(t, ns, "writer", podReady)
	t.Logf("pod writer Ready %s after its creation", time.Since(began).Round(time.Millisecond))
	g.Expect(pod.Status.InitContainerStatuses).To(HaveLen(1))
	terminated := pod.Status.InitContainerStatuses[0].State.Terminated
	g.Expect(terminated).NotTo(BeNil())
	g.Expect(terminated.ExitCode).To(BeZero())
	g.Expect(terminated.Message).To(Equal(fmt.Sprintf("wrote /data/greeting as uid %d: owner %d group %d", testUser, testUser, testFSGroup)))

	claim, err := cs.PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	volume, err := cs.PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(volume.Spec.CSI).NotTo(BeNil(), "a CSI volume, to which the kubelet applies fsGroup (its CSIDriver's fsGroupPolicy)")
}

// TestPodReachesAPIServerAndServiceByName runs a pod that asks the API
// server who it is through the kubernetes Service with its ServiceAccount
// token, and GETs another pod's readiness endpoint by its Service's name
// through cluster DNS, as the controller's endpoint check does.
func TestPodReachesAPIServerAndServiceByName(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := harness.Namespace(t, node.Client)
	cs := node.Clientset.CoreV1()

	_, err := cs.Pods(ns).Create(ctx, serverPod("server"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "server"},
			Ports:    []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	waitForPod(t, ns, "server", podReady)

	url := fmt.Sprintf("http://server.%s.svc:8080/ready", ns)
	_, err = cs.Pods(ns).Create(ctx, checkPod("check", url), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pod := waitForPod(t, ns, "check", podFinished)
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), "pod check: %s", terminationMessage(pod))
	message := terminationMessage(pod)
	g.Expect(message).To(ContainSubstring("api server user system:serviceaccount:%s:default;", ns))
	g.Expect(message).To(ContainSubstring("GET %s: 200", url))
}

// waitForPod waits until done accepts the pod and returns it.
func waitForPod(t testing.TB, ns, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		got, err := node.Clientset.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(done(got)).To(BeTrue(), "pod %s: %+v", name, got.Status)
		pod = got
	}).WithContext(t.Context()).WithTimeout(podTimeout).Should(Succeed())
	return pod
}

// podReady checks the pod's Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podFinished checks that the pod ran to its end.
func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// terminationMessage is the first container's termination message.
func terminationMessage(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			return s.State.Terminated.Message
		}
	}
	return ""
}

// volumeClaim asks the default StorageClass (local, WaitForFirstConsumer)
// for a small volume.
func volumeClaim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
}

// writerPod writes the Secret's content to the claim in an init container
// and serves /ready once the file exists.
func writerPod(name, claim, secret string) *corev1.Pod {
	pod := serverPod(name)
	pod.Spec.SecurityContext.FSGroup = new(int64(testFSGroup))
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}}
	mount := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.InitContainers = []corev1.Container{{
		Name:            "write",
		Image:           podcheckImage,
		ImagePullPolicy: corev1.PullNever,
		Args:            []string{"write", "/data/greeting"},
		Env: []corev1.EnvVar{{Name: "CONTENT", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "content"},
		}}},
		VolumeMounts:    mount,
		SecurityContext: restricted(),
	}}
	pod.Spec.Containers[0].Args = []string{"serve", ":8080", "/data/greeting"}
	pod.Spec.Containers[0].VolumeMounts = mount
	return pod
}

// serverPod serves /ready on 8080 behind a readiness probe, as a
// restricted non-root pod.
func serverPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: new(int64(testUser)), RunAsGroup: new(int64(testUser)), RunAsNonRoot: new(true),
			},
			Containers: []corev1.Container{{
				Name:            "serve",
				Image:           podcheckImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"serve", ":8080", "/podcheck"},
				Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
				SecurityContext: restricted(),
			}},
		},
	}
}

// checkPod runs `podcheck cluster url` once.
func checkPod(name, url string) *corev1.Pod {
	pod := serverPod(name)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].Args = []string{"cluster", url}
	pod.Spec.Containers[0].Ports = nil
	pod.Spec.Containers[0].ReadinessProbe = nil
	return pod
}

// restricted is the restricted Pod Security Standard's container context.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
