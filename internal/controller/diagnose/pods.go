package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Diagnosis is why a server's pods are not ready, as a Ready=False reason and
// a message naming the pod.
type Diagnosis struct {
	Reason  string
	Message string
}

// podCheck finds one kind of failure in a pod and describes it.
type podCheck func(pod *corev1.Pod) (message string, found bool)

// podChecks are tried in order, each over every pod; the first failure found
// is the Diagnosis. More specific causes come first: a container killed for
// memory is also in CrashLoopBackOff.
var podChecks = []struct {
	reason string
	check  podCheck
}{
	{embedopsv1.ErrImagePullReason, waitingWith(embedopsv1.ErrImagePullReason)},
	{embedopsv1.ImagePullBackOffReason, waitingWith(embedopsv1.ImagePullBackOffReason)},
	{embedopsv1.CreateContainerConfigErrorReason, waitingWith(embedopsv1.CreateContainerConfigErrorReason)},
	{embedopsv1.OOMKilledReason, terminatedWith(embedopsv1.OOMKilledReason)},
	{embedopsv1.CrashLoopBackOffReason, waitingWith(embedopsv1.CrashLoopBackOffReason)},
	{embedopsv1.UnschedulableReason, unschedulable},
}

// unboundClaimsMessage is kube-scheduler's reason for a pod whose claims
// with Immediate binding are not bound yet (kubernetes v1.37.2
// pkg/scheduler/framework/plugins/volumebinding/volume_binding.go,
// PreFilter); the pod is retried once they bind.
const unboundClaimsMessage = "pod has unbound immediate PersistentVolumeClaims"

// Pods returns the first failure podChecks find in the pods, or nil.
// Pods being deleted are ignored; pods are visited by name, so the same pods
// always give the same Diagnosis.
func Pods(pods []corev1.Pod) *Diagnosis {
	live := livePods(pods)
	for _, c := range podChecks {
		for _, pod := range live {
			if message, found := c.check(pod); found {
				return &Diagnosis{Reason: c.reason, Message: fmt.Sprintf("pod %s: %s", pod.Name, message)}
			}
		}
	}
	return nil
}

// livePods are the pods not being deleted, by name.
func livePods(pods []corev1.Pod) []*corev1.Pod {
	live := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			live = append(live, &pods[i])
		}
	}
	slices.SortFunc(live, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	return live
}

// waitingWith checks for a container waiting with the given reason.
func waitingWith(reason string) podCheck {
	return func(pod *corev1.Pod) (string, bool) {
		for _, status := range containerStatuses(pod) {
			if waiting := status.State.Waiting; waiting != nil && waiting.Reason == reason {
				return describe(status.Name, reason, waiting.Message), true
			}
		}
		return "", false
	}
}

// terminatedWith checks for a container that is not ready and whose current
// or last termination has the given reason.
func terminatedWith(reason string) podCheck {
	return func(pod *corev1.Pod) (string, bool) {
		for _, status := range containerStatuses(pod) {
			if status.Ready {
				continue
			}
			for _, terminated := range []*corev1.ContainerStateTerminated{status.State.Terminated, status.LastTerminationState.Terminated} {
				if terminated != nil && terminated.Reason == reason {
					return describe(status.Name, reason, fmt.Sprintf("exit code %d", terminated.ExitCode)), true
				}
			}
		}
		return "", false
	}
}

// unschedulable checks for a PodScheduled=False condition with reason
// Unschedulable, other than waiting for its claims to bind
// (WaitingForClaims): that is the cache's wait, which CacheReady reports,
// not a failing pod.
func unschedulable(pod *corev1.Pod) (string, bool) {
	message, found := podUnschedulable(pod)
	if !found || strings.Contains(message, unboundClaimsMessage) {
		return "", false
	}
	return message, true
}

// WaitingForClaims is the Diagnosis of the first pod, by name, that cannot
// be scheduled only until its claims bind; nil when none waits so. The
// server stays Initializing while it waits, and stalls as Unschedulable
// with it once spec.progressDeadline passes without progress.
func WaitingForClaims(pods []corev1.Pod) *Diagnosis {
	for _, pod := range livePods(pods) {
		if message, found := podUnschedulable(pod); found && strings.Contains(message, unboundClaimsMessage) {
			return &Diagnosis{Reason: embedopsv1.UnschedulableReason, Message: fmt.Sprintf("pod %s: %s", pod.Name, message)}
		}
	}
	return nil
}

// podUnschedulable describes a PodScheduled=False condition with reason
// Unschedulable.
func podUnschedulable(pod *corev1.Pod) (string, bool) {
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodScheduled && condition.Status == corev1.ConditionFalse && condition.Reason == corev1.PodReasonUnschedulable {
			if condition.Message == "" {
				return "cannot be scheduled", true
			}
			return "cannot be scheduled: " + condition.Message, true
		}
	}
	return "", false
}

// containerStatuses are the init containers' statuses, then the containers'.
func containerStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	return slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses)
}

// describe is "container <name>: <reason>[: <detail>]".
func describe(container, reason, detail string) string {
	if detail == "" {
		return fmt.Sprintf("container %s: %s", container, reason)
	}
	return fmt.Sprintf("container %s: %s: %s", container, reason, detail)
}
