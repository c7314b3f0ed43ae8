package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// clusterTimeout bounds every Eventually: kwok applies stages and the
// provisioner binds claims within a second or two.
const clusterTimeout = 30 * time.Second

// testImage is never pulled: kwok simulates the containers.
const testImage = "example.invalid/tei:test"

// TestCluster starts one local cluster and checks what tier-3 tests rely on:
// claims bind, pods become Ready, and annotated pods get the simulated state.
func TestCluster(t *testing.T) {
	started := time.Now()
	cluster, err := StartCluster(t.Context(), ClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("local cluster %s started in %s", cluster.Name, time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cluster.ComponentLogs(40))
		}
		stopping := time.Now()
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
		t.Logf("local cluster %s stopped in %s", cluster.Name, time.Since(stopping).Round(time.Millisecond))
	})
	namespace := cluster.Namespace(t)

	t.Run("claims of the default class bind and release their volumes", func(t *testing.T) {
		t.Parallel()
		testClaims(t, cluster, namespace)
	})
	t.Run("a deployment becomes ready, fails on demand and recovers", func(t *testing.T) {
		t.Parallel()
		testRollout(t, cluster, namespace)
	})
	t.Run("simulated pod states", func(t *testing.T) {
		t.Parallel()
		testSimulations(t, cluster, namespace)
	})
	t.Run("etcd skips fsync, as envtest's does", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		pid, ok := cluster.componentPIDs()["etcd"]
		g.Expect(ok).To(BeTrue(), "kwokctl recorded etcd's process")
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Split(string(cmdline), "\x00")).To(ContainElement("--unsafe-no-fsync=true"))
	})
}

// newG returns a Gomega for t with the cluster's Eventually timing.
func newG(t *testing.T) *WithT {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(clusterTimeout)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	return g
}

func testClaims(t *testing.T, cluster *Cluster, namespace string) {
	for _, mode := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "cache-", Namespace: namespace},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{mode},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			g.Expect(cluster.Client.Create(t.Context(), claim)).To(Succeed())
			g.Expect(claim.Spec.StorageClassName).To(HaveValue(Equal(DefaultStorageClass)), "the default class is set on admission")

			g.Eventually(func(g Gomega) {
				g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(claim), claim)).To(Succeed())
				g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
			}).Should(Succeed())
			volume := &corev1.PersistentVolume{}
			g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Name: claim.Spec.VolumeName}, volume)).To(Succeed())
			g.Expect(volume.Spec.AccessModes).To(ConsistOf(mode))
			g.Expect(volume.Spec.Capacity.Storage().String()).To(Equal("1Gi"))
			g.Expect(volume.Spec.PersistentVolumeReclaimPolicy).To(Equal(corev1.PersistentVolumeReclaimDelete))
			g.Expect(volume.Spec.CSI).NotTo(BeNil(), "a CSI volume, which the snapshot-controller can snapshot")
			g.Expect(volume.Spec.CSI.Driver).To(Equal(ProvisionerName))
			dir, err := VolumeDir(volume)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(dir).To(BeADirectory())

			g.Expect(cluster.Client.Delete(t.Context(), claim)).To(Succeed())
			g.Eventually(func(g Gomega) {
				err := cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(volume), volume)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the volume is deleted with its claim, got %v", err)
			}).Should(Succeed())
			g.Expect(dir).NotTo(BeAnExistingFile())
		})
	}
	t.Run("a StatefulSet's claim template", func(t *testing.T) {
		t.Parallel()
		testStatefulSetClaims(t, cluster, namespace)
	})
}

// testStatefulSetClaims checks the shape embedops creates: a StatefulSet
// whose pods mount a claim each and become Ready once it is bound.
func testStatefulSetClaims(t *testing.T, cluster *Cluster, namespace string) {
	g := newG(t)
	template := podTemplate("cached")
	template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/data"}}
	statefulSet := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cached", Namespace: namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            new(int32(2)),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{embedopsv1.NameLabel: "cached"}},
			Template:            template,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "cache"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
				},
			}},
		},
	}
	g.Expect(cluster.Client.Create(t.Context(), statefulSet)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(statefulSet), statefulSet)).To(Succeed())
		g.Expect(statefulSet.Status.ReadyReplicas).To(Equal(int32(2)))
	}).Should(Succeed())
	for _, name := range []string{"cache-cached-0", "cache-cached-1"} {
		claim := &corev1.PersistentVolumeClaim{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, claim)).To(Succeed())
		g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s", name)
	}
}

func testRollout(t *testing.T, cluster *Cluster, namespace string) {
	g := newG(t)
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "tei", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{embedopsv1.NameLabel: "tei"}},
			Template: podTemplate("tei"),
		},
	}
	g.Expect(cluster.Client.Create(t.Context(), deployment)).To(Succeed())
	waitForRollout(t, g, cluster, deployment)

	// A template asking for ImagePullBackOff rolls out pods that never
	// become ready; the old ones keep serving.
	setSimulation(t, g, cluster, deployment, SimulateImagePullBackOff)
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(cluster.Client.List(t.Context(), pods, client.InNamespace(namespace), client.MatchingLabels{embedopsv1.NameLabel: "tei"})).To(Succeed())
		g.Expect(pods.Items).To(ContainElement(HaveField("Status.ContainerStatuses", ContainElement(
			HaveField("State.Waiting.Reason", SimulateImagePullBackOff)))))
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(deployment), deployment)).To(Succeed())
		g.Expect(deployment.Status.ReadyReplicas).To(BeNumerically(">=", 1))
	}).Should(Succeed())

	// Removing the annotation rolls out pods that become ready again.
	setSimulation(t, g, cluster, deployment, "")
	waitForRollout(t, g, cluster, deployment)
}

// setSimulation sets or, when empty, removes the deployment template's
// SimulateAnnotation.
func setSimulation(t *testing.T, g *WithT, cluster *Cluster, deployment *appsv1.Deployment, simulation string) {
	t.Helper()
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(deployment), deployment)).To(Succeed())
	patch := client.MergeFrom(deployment.DeepCopy())
	if simulation == "" {
		delete(deployment.Spec.Template.Annotations, SimulateAnnotation)
	} else {
		deployment.Spec.Template.Annotations = map[string]string{SimulateAnnotation: simulation}
	}
	g.Expect(cluster.Client.Patch(t.Context(), deployment, patch)).To(Succeed())
}

// waitForRollout waits until every replica of the deployment's current
// template is ready and no other pod is left.
func waitForRollout(t *testing.T, g *WithT, cluster *Cluster, deployment *appsv1.Deployment) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(deployment), deployment)).To(Succeed())
		status := deployment.Status
		g.Expect(status.ObservedGeneration).To(Equal(deployment.Generation))
		g.Expect(status.UpdatedReplicas).To(Equal(*deployment.Spec.Replicas))
		g.Expect(status.ReadyReplicas).To(Equal(*deployment.Spec.Replicas))
		g.Expect(status.Replicas).To(Equal(*deployment.Spec.Replicas))
	}).Should(Succeed())
}

func testSimulations(t *testing.T, cluster *Cluster, namespace string) {
	waiting := func(reason, message string) func(Gomega, *corev1.Pod) {
		return func(g Gomega, pod *corev1.Pod) {
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(And(
				HaveField("Ready", false),
				HaveField("State.Waiting.Reason", reason),
				HaveField("State.Waiting.Message", message),
			)))
		}
	}
	crashing := func(restarts int32, lastReason string, exitCode int32) func(Gomega, *corev1.Pod) {
		return func(g Gomega, pod *corev1.Pod) {
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(And(
				HaveField("Ready", false),
				HaveField("RestartCount", restarts),
				HaveField("State.Waiting.Reason", "CrashLoopBackOff"),
				HaveField("LastTerminationState.Terminated.Reason", lastReason),
				HaveField("LastTerminationState.Terminated.ExitCode", exitCode),
			)))
		}
	}
	tests := []struct {
		name        string
		annotations map[string]string
		check       func(Gomega, *corev1.Pod)
	}{
		{
			name:        SimulateImagePullBackOff,
			annotations: map[string]string{SimulateAnnotation: SimulateImagePullBackOff},
			check:       waiting(SimulateImagePullBackOff, `Back-off pulling image "`+testImage+`"`),
		},
		{
			name:        SimulateErrImagePull,
			annotations: map[string]string{SimulateAnnotation: SimulateErrImagePull},
			check:       waiting(SimulateErrImagePull, `rpc error: code = NotFound desc = failed to pull and unpack image "`+testImage+`": not found`),
		},
		{
			name:        SimulateCreateContainerConfigError,
			annotations: map[string]string{SimulateAnnotation: SimulateCreateContainerConfigError, SimulateMessageAnnotation: `secret "hf-token" not found`},
			check:       waiting(SimulateCreateContainerConfigError, `secret "hf-token" not found`),
		},
		{
			name:        SimulateCrashLoopBackOff,
			annotations: map[string]string{SimulateAnnotation: SimulateCrashLoopBackOff},
			check:       crashing(3, "Error", 1),
		},
		{
			name:        SimulateOOMKilled,
			annotations: map[string]string{SimulateAnnotation: SimulateOOMKilled, SimulateRestartsAnnotation: "7"},
			check:       crashing(7, "OOMKilled", 137),
		},
		{
			name:        SimulateNotReady,
			annotations: map[string]string{SimulateAnnotation: SimulateNotReady},
			check: func(g Gomega, pod *corev1.Pod) {
				g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(And(
					HaveField("Ready", false),
					HaveField("State.Running", Not(BeNil())),
				)))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newG(t)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "tei-", Namespace: namespace, Annotations: tt.annotations},
				Spec:       podTemplate("simulated").Spec,
			}
			g.Expect(cluster.Client.Create(t.Context(), pod)).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
				g.Expect(pod.Status.Conditions).To(ContainElement(And(
					HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionFalse))))
				tt.check(g, pod)
			}).Should(Succeed())
		})
	}
	t.Run("Unschedulable", func(t *testing.T) {
		t.Parallel()
		g := newG(t)
		spec := podTemplate("simulated").Spec
		spec.NodeSelector = UnschedulableNodeSelector()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "tei-", Namespace: namespace}, Spec: spec}
		g.Expect(cluster.Client.Create(t.Context(), pod)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(pod.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodScheduled),
				HaveField("Status", corev1.ConditionFalse),
				HaveField("Reason", corev1.PodReasonUnschedulable),
			)))
		}).Should(Succeed())
	})
}

// podTemplate is a pod like embedops': one "embedding" container probed on
// /health, labelled with embedopsv1.NameLabel.
func podTemplate(name string) corev1.PodTemplateSpec {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}}}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{embedopsv1.NameLabel: name}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:           "embedding",
				Image:          testImage,
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				StartupProbe:   probe,
				ReadinessProbe: probe,
				LivenessProbe:  probe,
			}},
		},
	}
}
