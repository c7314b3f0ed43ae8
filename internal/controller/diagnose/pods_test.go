package diagnose

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// podOption changes a test pod.
type podOption func(*corev1.Pod)

// testPod is a pod of server "tei" with a running, unready TEI container.
func testPod(name string, options ...podOption) corev1.Pod {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "models"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name:  "embedding",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}},
		},
	}
	for _, option := range options {
		option(&pod)
	}
	return pod
}

func waiting(reason, message string) podOption {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	}
}

func lastTerminated(reason string, exitCode int32) podOption {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode},
		}
	}
}

func containerReady() podOption {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = true }
}

func initWaiting(reason string) podOption {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
			Name:  "populate",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
		}}
	}
}

func notScheduled(reason, message string) podOption {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = nil
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message,
		})
	}
}

func deleting() podOption {
	return func(p *corev1.Pod) { p.DeletionTimestamp = new(metav1.Now()) }
}

func TestDiagnoseFindsWhyPodsAreNotReady(t *testing.T) {
	cases := []struct {
		name    string
		pods    []corev1.Pod
		want    *Diagnosis
		comment string
	}{
		{
			name: "no pods",
		},
		{
			name: "starting pods",
			pods: []corev1.Pod{testPod("tei-0"), testPod("tei-1", waiting("ContainerCreating", ""))},
		},
		{
			name: "image pull back-off",
			pods: []corev1.Pod{testPod("tei-0", waiting("ImagePullBackOff", `Back-off pulling image "tei:9"`))},
			want: &Diagnosis{Reason: embedopsv1.ImagePullBackOffReason, Message: `pod tei-0: container embedding: ImagePullBackOff: Back-off pulling image "tei:9"`},
		},
		{
			name: "image pull error",
			pods: []corev1.Pod{testPod("tei-0", waiting("ErrImagePull", "manifest unknown"))},
			want: &Diagnosis{Reason: embedopsv1.ErrImagePullReason, Message: "pod tei-0: container embedding: ErrImagePull: manifest unknown"},
		},
		{
			name: "crash loop",
			pods: []corev1.Pod{testPod("tei-0", waiting("CrashLoopBackOff", "back-off 5m0s"), lastTerminated("Error", 1))},
			want: &Diagnosis{Reason: embedopsv1.CrashLoopBackOffReason, Message: "pod tei-0: container embedding: CrashLoopBackOff: back-off 5m0s"},
		},
		{
			name:    "killed for memory",
			pods:    []corev1.Pod{testPod("tei-0", waiting("CrashLoopBackOff", "back-off"), lastTerminated("OOMKilled", 137))},
			want:    &Diagnosis{Reason: embedopsv1.OOMKilledReason, Message: "pod tei-0: container embedding: OOMKilled: exit code 137"},
			comment: "the cause of the crash loop is more useful than the loop",
		},
		{
			name:    "killed for memory long ago",
			pods:    []corev1.Pod{testPod("tei-0", containerReady(), lastTerminated("OOMKilled", 137))},
			comment: "a ready container's last termination is history",
		},
		{
			name: "missing secret key",
			pods: []corev1.Pod{testPod("tei-0", waiting("CreateContainerConfigError", `couldn't find key token in Secret models/hf`))},
			want: &Diagnosis{Reason: embedopsv1.CreateContainerConfigErrorReason, Message: "pod tei-0: container embedding: CreateContainerConfigError: couldn't find key token in Secret models/hf"},
		},
		{
			name: "init container",
			pods: []corev1.Pod{testPod("tei-0", initWaiting("ImagePullBackOff"))},
			want: &Diagnosis{Reason: embedopsv1.ImagePullBackOffReason, Message: "pod tei-0: container populate: ImagePullBackOff"},
		},
		{
			name: "unschedulable",
			pods: []corev1.Pod{testPod("tei-0", notScheduled("Unschedulable", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."))},
			want: &Diagnosis{Reason: embedopsv1.UnschedulableReason, Message: "pod tei-0: cannot be scheduled: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
		},
		{
			name:    "waiting for its claims to bind",
			pods:    []corev1.Pod{testPod("tei-0", notScheduled("Unschedulable", unboundClaimsSchedulerMessage))},
			comment: "the cache's wait, which CacheReady reports; WaitingForClaims keeps it for the deadline",
		},
		{
			name: "scheduling gated",
			pods: []corev1.Pod{testPod("tei-0", notScheduled("SchedulingGated", ""))},
		},
		{
			name:    "pods by name",
			pods:    []corev1.Pod{testPod("tei-2", waiting("ImagePullBackOff", "")), testPod("tei-1", waiting("ImagePullBackOff", ""))},
			want:    &Diagnosis{Reason: embedopsv1.ImagePullBackOffReason, Message: "pod tei-1: container embedding: ImagePullBackOff"},
			comment: "the same pods always give the same message",
		},
		{
			name:    "reason before pod order",
			pods:    []corev1.Pod{testPod("tei-0", notScheduled("Unschedulable", "")), testPod("tei-1", waiting("CrashLoopBackOff", ""))},
			want:    &Diagnosis{Reason: embedopsv1.CrashLoopBackOffReason, Message: "pod tei-1: container embedding: CrashLoopBackOff"},
			comment: "a crashing pod says more than a pending one",
		},
		{
			name: "pods being deleted",
			pods: []corev1.Pod{testPod("tei-0", waiting("CrashLoopBackOff", ""), deleting())},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Pods(tc.pods)).To(Equal(tc.want), tc.comment)
		})
	}
}

func TestWaitingForClaimsNamesThePodThatWaitsOnlyForItsClaims(t *testing.T) {
	g := NewWithT(t)
	g.Expect(WaitingForClaims([]corev1.Pod{testPod("tei-0"), testPod("tei-1", notScheduled("Unschedulable", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."))})).To(BeNil())
	g.Expect(WaitingForClaims([]corev1.Pod{testPod("tei-1", notScheduled("Unschedulable", unboundClaimsSchedulerMessage)), testPod("tei-0", notScheduled("Unschedulable", unboundClaimsSchedulerMessage))})).
		To(Equal(&Diagnosis{Reason: embedopsv1.UnschedulableReason, Message: "pod tei-0: cannot be scheduled: " + unboundClaimsSchedulerMessage}))
	g.Expect(WaitingForClaims([]corev1.Pod{testPod("tei-0", deleting(), notScheduled("Unschedulable", unboundClaimsSchedulerMessage))})).To(BeNil(), "a pod being deleted waits for nothing")
}

// unboundClaimsSchedulerMessage is kube-scheduler v1.37.2's message on a
// pod whose cache claim the provisioner has not bound yet.
const unboundClaimsSchedulerMessage = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
