package controller

import (
	"maps"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// Results of the populate init container in the tests.
const (
	commitA = "1111111111111111111111111111111111111111"
	commitB = "2222222222222222222222222222222222222222"
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// populated is a populate init container that exited 0 with a result.
func populated(commit, digest string) corev1.ContainerStatus {
	return terminatedPopulate(0, `{"resolvedCommit":"`+commit+`","contentDigest":"`+digest+`","files":3,"bytes":10}`)
}

// terminatedPopulate is a populate init container that exited.
func terminatedPopulate(exitCode int32, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:  builder.PopulateContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Completed", Message: message}},
	}
}

// runningPopulate is a populate init container still downloading.
func runningPopulate() corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:  builder.PopulateContainerName,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}
}

// podWith is a pod whose init containers report statuses.
func podWith(name string, statuses ...corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{InitContainerStatuses: statuses}}
}

func TestModelReportOf(t *testing.T) {
	crashLooping := corev1.ContainerStatus{
		Name:                 builder.PopulateContainerName,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"error":"hub said 401"}`}},
	}
	cases := []struct {
		name         string
		pods         []corev1.Pod
		recorded     *embedopsv1.RealizedCache
		wantOK       bool
		wantStatus   metav1.ConditionStatus
		wantReason   string
		wantMessage  string
		wantRealized *embedopsv1.RealizedCache
		wantMismatch []string
	}{
		{name: "no pods"},
		{name: "no populate init container", pods: []corev1.Pod{podWith("s-0")}},
		{
			name: "downloading", pods: []corev1.Pod{podWith("s-0", runningPopulate())}, wantOK: true,
			wantStatus: metav1.ConditionFalse, wantReason: embedopsv1.DownloadingReason, wantMessage: "1/1 pods",
		},
		{
			name: "downloaded, nothing recorded", pods: []corev1.Pod{podWith("s-1", populated(commitB, digestB)), podWith("s-0", populated(commitA, digestA))},
			wantOK: true, wantStatus: metav1.ConditionTrue, wantReason: embedopsv1.DownloadedReason, wantMessage: commitA,
			wantRealized: &embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, Bytes: new(int64(10))},
			wantMismatch: []string{"s-1"},
		},
		{
			name: "downloaded as recorded", pods: []corev1.Pod{podWith("s-0", populated(commitA, digestA))},
			recorded: &embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA},
			wantOK:   true, wantStatus: metav1.ConditionTrue, wantReason: embedopsv1.DownloadedReason, wantMessage: commitA,
		},
		{
			name: "another commit than recorded", pods: []corev1.Pod{podWith("s-0", populated(commitB, digestB))},
			recorded: &embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA},
			wantOK:   true, wantStatus: metav1.ConditionTrue, wantReason: embedopsv1.DownloadedReason, wantMessage: "resolved commit mismatch: s-0 resolved " + commitB,
			wantMismatch: []string{"s-0"},
		},
		{
			name: "one downloaded, one failed", pods: []corev1.Pod{podWith("s-0", populated(commitA, digestA)), podWith("s-1", terminatedPopulate(1, `{"error":"no such revision"}`))},
			wantOK: true, wantStatus: metav1.ConditionFalse, wantReason: embedopsv1.DownloadFailedReason, wantMessage: "pod s-1: no such revision",
			wantRealized: &embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, Bytes: new(int64(10))},
		},
		{
			name: "failed and waiting to restart", pods: []corev1.Pod{podWith("s-0", crashLooping)},
			wantOK: true, wantStatus: metav1.ConditionFalse, wantReason: embedopsv1.DownloadFailedReason, wantMessage: "hub said 401",
		},
		{
			name: "a result the binding would refuse", pods: []corev1.Pod{podWith("s-0", populated("main", "sha256:short"))},
			wantOK: true, wantStatus: metav1.ConditionFalse, wantReason: embedopsv1.DownloadFailedReason, wantMessage: "without a readable result",
		},
		{
			name: "exited 0 without a result", pods: []corev1.Pod{podWith("s-0", terminatedPopulate(0, "done"))},
			wantOK: true, wantStatus: metav1.ConditionFalse, wantReason: embedopsv1.DownloadFailedReason, wantMessage: "without a readable result",
		},
		{
			name: "failed without a message", pods: []corev1.Pod{podWith("s-0", terminatedPopulate(137, ""))},
			wantOK: true, wantStatus: metav1.ConditionFalse, wantReason: embedopsv1.DownloadFailedReason, wantMessage: "exited with code 137",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			report, ok := modelReportOf(tc.pods, tc.recorded)
			g.Expect(ok).To(Equal(tc.wantOK))
			if !ok {
				return
			}
			g.Expect(report.status).To(Equal(tc.wantStatus))
			g.Expect(report.reason).To(Equal(tc.wantReason))
			g.Expect(report.message).To(ContainSubstring(tc.wantMessage))
			g.Expect(report.realized).To(Equal(tc.wantRealized))
			g.Expect(report.mismatched).To(Equal(tc.wantMismatch))
		})
	}
}

// withPopulator runs the populate init container in PerReplica pods.
func withPopulator(opts *ManagerOptions) {
	opts.EmbeddingServer.PopulatorImage = "embedops-controller:test"
}

// completeResolveJob plays the Job controller and the kubelet for the
// resolve Job a new PerReplica binding with a populator runs before its
// StatefulSet (builder.ResolvesFirst): the revision resolved to commitA.
func completeResolveJob(t *testing.T, g *WithT, namespace string) {
	t.Helper()
	binding := cacheBindingOfJob(t, g, namespace)
	job := populateJobOf(t, g, namespace, binding)
	g.Expect(job.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--resolve-only"))
	completeJob(t, g, job, terminatedPopulate(0, `{"resolvedCommit":"`+commitA+`","contentDigest":"","files":0,"bytes":0}`))
}

// createServerPod plays the StatefulSet controller: it creates the pod
// <server>-<ordinal> with the pod template's labels, and sets the status of
// its populate init container.
func createServerPod(t *testing.T, g *WithT, key types.NamespacedName, ordinal string, populate corev1.ContainerStatus) {
	t.Helper()
	sts := waitForStatefulSet(t, g, key)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-" + ordinal, Labels: sts.Spec.Template.Labels},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: builder.PopulateContainerName, Image: "embedops-controller:test"}},
			Containers:     []corev1.Container{{Name: builder.ContainerName, Image: "tei:test"}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), pod)).To(Succeed())
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{populate}}
	g.Expect(env.Client.Status().Update(t.Context(), pod)).To(Succeed())
}

func TestServerPodsPopulateTheirCacheBeforeTEIStartsOffline(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2)))
	completeResolveJob(t, g, namespace)

	sts := waitForStatefulSet(t, g, key)
	template := sts.Spec.Template.Spec
	g.Expect(template.InitContainers).To(HaveLen(1))
	g.Expect(template.InitContainers[0].Name).To(Equal(builder.PopulateContainerName))
	g.Expect(template.InitContainers[0].Image).To(Equal("embedops-controller:test"))
	g.Expect(template.InitContainers[0].Command).To(ContainElements("populate", "--termination-log"))
	g.Expect(template.Containers[0].Env).NotTo(ContainElement(HaveField("Name", "HF_HUB_OFFLINE")), "TEI never reads it")
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadingReason)

	createServerPod(t, g, key, "0", populated(commitA, digestA))
	server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionTrue, embedopsv1.DownloadedReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).To(ContainSubstring(commitA))
	bindingName := waitForBinding(t, g, key, "").Name
	g.Eventually(func(g Gomega) {
		binding := getBinding(t, g, namespace, bindingName)
		g.Expect(binding.Status.Realized).To(Equal(&embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, Bytes: new(int64(10))}))
	}).Should(Succeed())

	// A second replica resolved the revision to another commit: the
	// binding keeps the first, and the server says so.
	createServerPod(t, g, key, "1", populated(commitB, digestB))
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ResolvedCommitMismatchReason)).To(HaveLen(1))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(conditions.IsTrue(server, embedopsv1.ModelReadyCondition)).To(BeTrue())
		g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).To(ContainSubstring("tei-1 resolved " + commitB))
	}).Should(Succeed())
	requestReconcile(t, g, key)
	binding := getBinding(t, g, namespace, bindingName)
	g.Expect(binding.Status.Realized).To(Equal(&embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, Bytes: new(int64(10))}))
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ResolvedCommitMismatchReason)).To(HaveLen(1))
	checkConditions(t, g, key)
}

func TestServerReportsAFailedPopulate(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	completeResolveJob(t, g, namespace)

	createServerPod(t, g, key, "0", terminatedPopulate(1, `{"error":"revision nope not found"}`))
	server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadFailedReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).To(ContainSubstring("tei-0: revision nope not found"))
	binding := getBinding(t, g, namespace, waitForBinding(t, g, key, "").Name)
	g.Expect(binding.Status.Realized).To(Equal(&embedopsv1.RealizedCache{ResolvedCommit: commitA}), "only the resolve Job's commit")
	checkConditions(t, g, key)
}

func TestServerWithoutPopulatorReportsNoModelReady(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Spec.Template.Spec.InitContainers).To(BeEmpty())
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		g.Expect(strings.HasPrefix(e.Name, "HF_HUB_OFFLINE")).To(BeFalse())
	}
	server := requestReconcile(t, g, key)
	g.Expect(conditions.Has(server, embedopsv1.ModelReadyCondition)).To(BeFalse())
}

func TestPodsOfAnEarlierBindingAreNotRead(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	completeResolveJob(t, g, namespace)
	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Spec.Template.Labels).To(HaveKey(embedopsv1.CacheBindingLabel))

	// A pod left by a rollout from another binding reports another commit.
	stale := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tei-9", Labels: maps.Clone(sts.Spec.Template.Labels)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: builder.ContainerName, Image: "tei:test"}}},
	}
	stale.Labels[embedopsv1.CacheBindingLabel] = "an-earlier-binding"
	g.Expect(env.Client.Create(t.Context(), stale)).To(Succeed())
	stale.Status = corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{populated(commitB, digestB)}}
	g.Expect(env.Client.Status().Update(t.Context(), stale)).To(Succeed())

	createServerPod(t, g, key, "0", populated(commitA, digestA))
	server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionTrue, embedopsv1.DownloadedReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).NotTo(ContainSubstring("mismatch"))
	g.Eventually(func(g Gomega) {
		binding := getBinding(t, g, namespace, getServer(t, g, key).Status.CacheBinding)
		g.Expect(binding.Status.Realized).To(Equal(&embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, Bytes: new(int64(10))}))
	}).Should(Succeed())
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ResolvedCommitMismatchReason)).To(BeEmpty())
}
