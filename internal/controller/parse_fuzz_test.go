package controller

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

// FuzzPopulateOutcome checks that any termination message and exit code
// classify the populate init container as exactly one of done, failed or
// downloading, that a failure always says why, and that a success carries
// the commit it read.
func FuzzPopulateOutcome(f *testing.F) {
	for _, seed := range []struct {
		message string
		exit    int32
		waiting bool
	}{
		{`{"resolvedCommit":"` + sha40 + `","contentDigest":"sha256:` + sha40 + sha40[:24] + `"}`, 0, false},
		{`{"error":"401 Unauthorized"}`, 1, false},
		{`{"error":"gone"}`, 2, true},
		{`not json`, 0, false},
		{``, 137, false},
		{`{"resolvedCommit":""}`, 0, false},
		{`{"resolvedCommit":7}`, 0, false},
	} {
		f.Add(seed.message, seed.exit, seed.waiting)
	}
	f.Fuzz(func(t *testing.T, message string, exit int32, waiting bool) {
		outcome, ok := populateOutcomeOf(podWithPopulateStatus(message, exit, waiting))
		switch {
		case !ok:
			t.Fatal("a pod with a populate init container status reported none")
		case outcome.done && outcome.failed:
			t.Fatalf("%q (exit %d) is both done and failed", message, exit)
		case waiting && exit == 0 && (outcome.done || outcome.failed):
			t.Fatalf("a container waiting without a failure is not downloading: %+v", outcome)
		case exit != 0 && !outcome.failed:
			t.Fatalf("exit %d with %q is not a failure: %+v", exit, message, outcome)
		case outcome.failed && outcome.detail == "":
			t.Fatalf("%q (exit %d) failed without saying why", message, exit)
		case outcome.done && (exit != 0 || outcome.result.ResolvedCommit == ""):
			t.Fatalf("%q (exit %d) is done without a commit: %+v", message, exit, outcome)
		}
		if outcome.done {
			var want populateMessage
			if err := json.Unmarshal([]byte(message), &want); err != nil || !reflect.DeepEqual(outcome.result, want) {
				t.Fatalf("%q is done with %+v, want %+v (%v)", message, outcome.result, want, err)
			}
		}
	})
}

// sha40 is a well-formed commit.
const sha40 = "0123456789abcdef0123456789abcdef01234567"

// podWithPopulateStatus is a pod whose populate init container terminated
// with exit and message, or, when waiting, waits to restart after that.
func podWithPopulateStatus(message string, exit int32, waiting bool) *corev1.Pod {
	terminated := &corev1.ContainerStateTerminated{ExitCode: exit, Message: message, Reason: "Fuzzed"}
	status := corev1.ContainerStatus{Name: builder.PopulateContainerName, State: corev1.ContainerState{Terminated: terminated}}
	if waiting {
		status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		status.LastTerminationState = corev1.ContainerState{Terminated: terminated}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "s-0", Labels: map[string]string{embedopsv1.NameLabel: "s"}},
		Status:     corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{status}},
	}
}
