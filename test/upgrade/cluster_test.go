package upgrade

import (
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // commit ids, as git's
	"crypto/sha256"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/internal/builder"
)

// exampleDir holds the examples in the repository, at every release.
const exampleDir = "examples"

// baselineExamples returns every object of release's examples/**.yaml in
// namespace, in path order: the servers users wrote against that release,
// with the Secrets and claims they name.
func baselineExamples(t *testing.T, release *Baseline, namespace string) []*unstructured.Unstructured {
	t.Helper()
	files, err := release.Files(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(files))
	for name := range files {
		if path.Ext(name) == ".yaml" {
			paths = append(paths, name)
		}
	}
	slices.Sort(paths)
	var objects []*unstructured.Unstructured
	for _, name := range paths {
		for i, doc := range bytes.Split(files[name], []byte("\n---")) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				t.Fatalf("%s at %s, document %d: %v", name, baseline.Commit, i, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			// One namespace for all, as the GitOps layouts apply them
			// (examples/Kustomization); an example naming another one
			// (prometheus-adapter's ConfigMap) comes along.
			obj.SetNamespace(namespace)
			objects = append(objects, obj)
		}
	}
	return objects
}

// servers returns the names of the EmbeddingServers among objects.
func servers(objects []*unstructured.Unstructured) []string {
	var names []string
	for _, obj := range objects {
		if obj.GroupVersionKind() == serverGVK {
			names = append(names, obj.GetName())
		}
	}
	return names
}

// populatorImage is the populate image both releases run with, as
// config/manager passes it; nothing pulls it here.
const populatorImage = "embedops-controller:latest"

// playCluster does once what envtest's missing controllers and kubelet would
// do in namespace, writing only what is behind: the PersistentVolume
// controller binds every claim; every populate Job succeeds with a result;
// the StatefulSet controller reports every StatefulSet's replicas ready and
// updated at its generation, under a revision named after the generation
// (a new pod template shows as a new revision, as its controller-revision
// hash would), and starts a pod per replica whose populate init container
// finished.
func playCluster(ctx context.Context, g Gomega, namespace string) {
	bindClaims(ctx, g, namespace)
	finishJobs(ctx, g, namespace)
	var sets appsv1.StatefulSetList
	g.Expect(env.Client.List(ctx, &sets, client.InNamespace(namespace))).To(Succeed())
	for i := range sets.Items {
		sts := &sets.Items[i]
		startPods(ctx, g, sts)
		replicas := int32(1)
		if sts.Spec.Replicas != nil {
			replicas = *sts.Spec.Replicas
		}
		revision := revisionOf(sts)
		if sts.Status.ObservedGeneration == sts.Generation && sts.Status.ReadyReplicas == replicas && sts.Status.UpdateRevision == revision {
			continue
		}
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation,
			Replicas:           replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			CurrentReplicas: replicas, UpdatedReplicas: replicas,
			CurrentRevision: revision, UpdateRevision: revision,
		}
		g.Expect(env.Client.Status().Update(ctx, sts)).To(Succeed(), "marking StatefulSet %s ready", sts.Name)
	}
}

// bindClaims plays the PersistentVolume controller: every claim is Bound.
func bindClaims(ctx context.Context, g Gomega, namespace string) {
	var claims corev1.PersistentVolumeClaimList
	g.Expect(env.Client.List(ctx, &claims, client.InNamespace(namespace))).To(Succeed())
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.Status.Phase == corev1.ClaimBound {
			continue
		}
		claim.Status.Phase = corev1.ClaimBound
		claim.Status.AccessModes = claim.Spec.AccessModes
		claim.Status.Capacity = claim.Spec.Resources.Requests
		g.Expect(env.Client.Status().Update(ctx, claim)).To(Succeed(), "binding claim %s", claim.Name)
	}
}

// finishJobs plays the Job controller and the kubelet: every unfinished
// Job gets a pod whose populate container exited 0 with a result, and
// succeeds.
func finishJobs(ctx context.Context, g Gomega, namespace string) {
	var jobs batchv1.JobList
	g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(namespace))).To(Succeed())
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
			return c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed
		}) {
			continue
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: job.Name + "-0", Labels: job.Spec.Template.Labels},
			Spec:       job.Spec.Template.Spec,
		}
		g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, pod))).To(Succeed(), "creating the pod of Job %s", job.Name)
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		command := slices.Concat(job.Spec.Template.Spec.Containers[0].Command, job.Spec.Template.Spec.Containers[0].Args)
		pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{populated(command)}}
		g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed(), "finishing the pod of Job %s", job.Name)
		now := metav1.Now()
		job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		}
		g.Expect(env.Client.Status().Update(ctx, job)).To(Succeed(), "finishing Job %s", job.Name)
	}
}

// startPods plays the StatefulSet controller and the kubelet for a
// StatefulSet whose pods populate their cache: each replica's pod is
// running and ready, its populate init container finished with a result.
func startPods(ctx context.Context, g Gomega, sts *appsv1.StatefulSet) {
	i := slices.IndexFunc(sts.Spec.Template.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == builder.PopulateContainerName })
	if i < 0 || sts.Spec.Replicas == nil {
		return
	}
	populate := sts.Spec.Template.Spec.InitContainers[i]
	for ordinal := range *sts.Spec.Replicas {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: fmt.Sprintf("%s-%d", sts.Name, ordinal), Labels: sts.Spec.Template.Labels},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: builder.PopulateContainerName, Image: populate.Image}},
				Containers:     []corev1.Container{{Name: builder.ContainerName, Image: sts.Spec.Template.Spec.Containers[0].Image}},
			},
		}
		err := env.Client.Create(ctx, pod)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "creating pod %s", pod.Name)
		pod.Status = corev1.PodStatus{
			Phase:                 corev1.PodRunning,
			Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			InitContainerStatuses: []corev1.ContainerStatus{populated(slices.Concat(populate.Command, populate.Args))},
			ContainerStatuses: []corev1.ContainerStatus{{Name: builder.ContainerName, Ready: true, Started: new(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		}
		g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed(), "starting pod %s", pod.Name)
	}
}

// populated is the status of a populate container run with command that
// exited 0: its termination message is `embedops populate`'s result, the
// commit the revision resolves to (the revision itself when it is one, as
// the hub answers), a content digest and sizes.
func populated(command []string) corev1.ContainerStatus {
	model, revision := argument(command, "--model"), argument(command, "--revision")
	commit := revision
	if !commitID.MatchString(revision) {
		commit = fmt.Sprintf("%x", sha1.Sum([]byte(model+"@"+revision))) //nolint:gosec // a commit id, as git's
	}
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(model+"@"+commit)))
	message := fmt.Sprintf(`{"resolvedCommit":%q,"contentDigest":%q,"files":3,"bytes":10}`, commit, digest)
	return corev1.ContainerStatus{
		Name:  builder.PopulateContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: message}},
	}
}

// argument is the value following flag in command ("--flag value" or
// "--flag=value"), empty when absent.
func argument(command []string, flag string) string {
	for i, arg := range command {
		if value, ok := strings.CutPrefix(arg, flag+"="); ok {
			return value
		}
		if arg == flag && i+1 < len(command) {
			return command[i+1]
		}
	}
	return ""
}

// commitID is a full commit id.
var commitID = regexp.MustCompile(`^[0-9a-f]{40}$`)

// revisionOf is the revision playCluster reports for the StatefulSet's
// current generation.
func revisionOf(sts *appsv1.StatefulSet) string {
	return fmt.Sprintf("%s-g%d", sts.Name, sts.Generation)
}

// readyServers fails unless every server in namespace is Ready for its
// current generation, and returns them by name.
func readyServers(ctx context.Context, g Gomega, namespace string) map[string]*unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(serverGVK.GroupVersion().WithKind(serverGVK.Kind + "List"))
	g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	byName := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		server := &list.Items[i]
		observed, _, _ := unstructured.NestedInt64(server.Object, "status", "observedGeneration")
		g.Expect(observed).To(Equal(server.GetGeneration()), "server %s: status of an older generation", server.GetName())
		ready := conditionOf(server, "Ready")
		g.Expect(ready).NotTo(BeNil(), "server %s has no Ready condition", server.GetName())
		g.Expect(ready["status"]).To(Equal("True"), "server %s: %v %v", server.GetName(), ready["reason"], ready["message"])
		byName[server.GetName()] = server
	}
	return byName
}

// conditionOf returns the object's status condition of type kind, nil
// when it has none.
func conditionOf(obj *unstructured.Unstructured, kind string) map[string]any {
	items, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, item := range items {
		if condition, ok := item.(map[string]any); ok && condition["type"] == kind {
			return condition
		}
	}
	return nil
}

// logsOnFailure logs the tail of a controller's output when the test fails.
func logsOnFailure(t *testing.T, what string, logs func() string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		lines := strings.Split(strings.TrimRight(logs(), "\n"), "\n")
		if len(lines) > 200 {
			lines = lines[len(lines)-200:]
		}
		t.Logf("the log of %s (last %d lines):\n%s", what, len(lines), strings.Join(lines, "\n"))
	})
}
