package controller

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestSharedCacheIsPopulatedOnceByAJobBeforeServersStart(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hf"},
		Data:       map[string][]byte{"token": []byte("hf_populate")},
	})).To(Succeed())
	first := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithToken("hf", "token")))
	bindingName := cacheBindingOfJob(t, g, namespace)
	job := populateJobOf(t, g, namespace, bindingName)
	g.Expect(job.Spec.Template.Spec.Volumes).To(ConsistOf(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", bindingName)))
	g.Expect(job.Spec.Template.Spec.Containers[0].Env).To(ContainElement(HaveField("ValueFrom.SecretKeyRef.Name", "hf")),
		"the server that needed the Job first gives its token Secret")
	second := createServer(t, g, fixtures.EmbeddingServer(namespace, "b", fixtures.WithCacheMode(embedopsv1.CacheModeShared)))

	for _, key := range []types.NamespacedName{first, second} {
		server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadingReason)
		g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.DownloadingReason))
	}
	for _, key := range []types.NamespacedName{first, second} {
		err := env.Client.Get(t.Context(), key, &corev1.Service{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no child is applied before the cache is populated: %v", err)
	}

	g.Eventually(func(g Gomega) {
		binding := getBinding(t, g, namespace, bindingName)
		g.Expect(conditions.GetReason(binding, embedopsv1.ModelReadyCondition)).To(Equal(embedopsv1.DownloadingReason))
	}).Should(Succeed(), "the binding reports its populate Job")

	completeJob(t, g, job, populated(commitA, digestA))

	for _, key := range []types.NamespacedName{first, second} {
		server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionTrue, embedopsv1.DownloadedReason)
		g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).To(ContainSubstring(commitA))
		sts := waitForStatefulSet(t, g, key)
		g.Expect(sts.Spec.Template.Spec.InitContainers).To(BeEmpty())
		g.Expect(sts.Spec.Template.Spec.Containers[0].Env).NotTo(ContainElement(HaveField("Name", "HF_HUB_OFFLINE")), "TEI never reads it")
		g.Expect(sts.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--revision="+commitA), "TEI runs the commit the Job recorded")
	}
	g.Expect(cacheBindingOf(t, g, second)).To(Equal(bindingName), "status.cacheBinding names the binding once the pods mount it")
	binding := getBinding(t, g, namespace, bindingName)
	g.Expect(binding.Status.Realized).To(Equal(&embedopsv1.RealizedCache{ResolvedCommit: commitA, ContentDigest: digestA, Bytes: new(int64(10))}))
	g.Expect(conditions.IsTrue(binding, embedopsv1.ModelReadyCondition)).To(BeTrue(), "ModelReady is written with the realized cache")
	g.Expect(conditions.GetMessage(binding, embedopsv1.ModelReadyCondition)).To(ContainSubstring(commitA))
	var jobs batchv1.JobList
	g.Expect(env.Client.List(t.Context(), &jobs, client.InNamespace(namespace))).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "one Job for the shared claim, whatever the number of servers")
	checkConditions(t, g, first)
}

func TestFailedPopulateJobHoldsTheServer(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", fixtures.WithCacheMode(embedopsv1.CacheModeShared)))
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadingReason)
	bindingName := cacheBindingOfJob(t, g, namespace)
	job := populateJobOf(t, g, namespace, bindingName)

	failJob(t, g, job, terminatedPopulate(1, `{"error":"the hub refused the token (401)"}`))

	server := waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadFailedReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ModelReadyCondition)).To(ContainSubstring("the hub refused the token (401)"))
	g.Expect(conditions.GetReason(server, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.DownloadFailedReason))
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "a", embedopsv1.DownloadFailedReason)).To(HaveLen(1))
	}).Should(Succeed())
	g.Expect(getBinding(t, g, namespace, bindingName).Status.Realized).To(BeNil())
	g.Eventually(func(g Gomega) {
		binding := getBinding(t, g, namespace, bindingName)
		g.Expect(conditions.GetReason(binding, embedopsv1.ModelReadyCondition)).To(Equal(embedopsv1.DownloadFailedReason))
		g.Expect(conditions.GetMessage(binding, embedopsv1.ModelReadyCondition)).To(ContainSubstring("the hub refused the token (401)"))
		g.Expect(warningEvents(t, g, namespace, bindingName, embedopsv1.DownloadFailedReason)).To(HaveLen(1), "the binding tells its own story")
	}).Should(Succeed())
	err := env.Client.Get(t.Context(), key, &corev1.Service{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a failed download starts no server: %v", err)
	checkConditions(t, g, key)
}

// cacheBindingOf waits until the server names its binding (written in the
// status patch after the conditions').
func cacheBindingOf(t *testing.T, g *WithT, key types.NamespacedName) string {
	t.Helper()
	var name string
	g.Eventually(func(g Gomega) {
		name = getServer(t, g, key).Status.CacheBinding
		g.Expect(name).NotTo(BeEmpty())
	}).Should(Succeed())
	return name
}

// populateJobOf waits for the populate Job of the binding.
func populateJobOf(t *testing.T, g *WithT, namespace, binding string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	key := types.NamespacedName{Namespace: namespace, Name: builder.PopulateJobName(binding)}
	g.Eventually(func() error { return env.Client.Get(t.Context(), key, job) }).Should(Succeed())
	g.Expect(job.Labels).To(HaveKeyWithValue(embedopsv1.PopulatesLabel, binding))
	g.Expect(job.OwnerReferences).To(ConsistOf(HaveField("Name", binding)))
	return job
}

// completeJob plays the Job controller and the kubelet: the Job's pod
// exits with status and the Job succeeds.
func completeJob(t *testing.T, g *WithT, job *batchv1.Job, status corev1.ContainerStatus) {
	t.Helper()
	createJobPod(t, g, job, status)
	finishJob(t, g, job, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete, func(s *batchv1.JobStatus) {
		s.Succeeded = 1
		s.CompletionTime = new(metav1.Now())
	})
}

// failJob plays the Job controller and the kubelet: the Job's pod exits
// with status and the Job fails.
func failJob(t *testing.T, g *WithT, job *batchv1.Job, status corev1.ContainerStatus) {
	t.Helper()
	createJobPod(t, g, job, status)
	finishJob(t, g, job, batchv1.JobFailureTarget, batchv1.JobFailed, func(s *batchv1.JobStatus) { s.Failed = 1 })
}

// createJobPod creates the Job's pod with the Job controller's labels and
// the populate container's status.
func createJobPod(t *testing.T, g *WithT, job *batchv1.Job, status corev1.ContainerStatus) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-x", Labels: job.Spec.Template.Labels},
		Spec:       job.Spec.Template.Spec,
	}
	g.Expect(pod.Labels).To(HaveKeyWithValue(batchv1.ControllerUidLabel, string(job.UID)), "the API server labels the template")
	g.Expect(env.Client.Create(t.Context(), pod)).To(Succeed())
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{status}}
	g.Expect(env.Client.Status().Update(t.Context(), pod)).To(Succeed())
}

// finishJob sets the Job's interim and terminal conditions, as the Job
// controller does.
func finishJob(t *testing.T, g *WithT, job *batchv1.Job, interim, terminal batchv1.JobConditionType, counts func(*batchv1.JobStatus)) {
	t.Helper()
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: interim, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		{Type: terminal, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
	}
	counts(&job.Status)
	g.Expect(env.Client.Status().Update(t.Context(), job)).To(Succeed())
}

// TestFinishedPopulateJobWakesItsNewServer: the Job of a new server's
// binding wakes the server when it finishes, though the server names no
// binding in its status yet; nothing else would until --progress-interval.
func TestFinishedPopulateJobWakesItsNewServer(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator, func(opts *ManagerOptions) { opts.EmbeddingServer.ProgressInterval = time.Hour })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadingReason)
	g.Expect(getServer(t, g, key).Status.CacheBinding).To(BeEmpty(), "a new server names its binding once its children are applied")

	completeResolveJob(t, g, namespace)

	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--revision=" + commitA))
}
