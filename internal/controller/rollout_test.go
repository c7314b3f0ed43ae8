package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

func TestReadyWaitsForTheStatefulSetsUpdateRevision(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2)))
	markStatefulSetReady(t, g, key)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	before := waitForStatefulSet(t, g, key).Generation

	updateServer(t, g, key, func(s *embedopsv1.EmbeddingServer) { s.Spec.Args = []string{"--max-batch-tokens=8192"} })
	// The StatefulSet controller observed the new generation; the old pods
	// are all ready, none runs the update revision yet.
	setStatefulSetStatus(t, g, key, func(sts *appsv1.StatefulSet) bool {
		if sts.Generation == before {
			return false
		}
		sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
			CurrentReplicas: 2, UpdatedReplicas: 0, CurrentRevision: "tei-old", UpdateRevision: "tei-new"}
		return true
	})
	g.Eventually(func(g Gomega) {
		server := getServer(t, g, key)
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
		g.Expect(conditions.IsFalse(server, embedopsv1.ReadyCondition)).To(BeTrue())
		g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring("rolling out"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(conditions.IsFalse(getServer(t, g, key), embedopsv1.ReadyCondition)).To(BeTrue(), "Ready before the update rolled out")
	}).Should(Succeed())

	setStatefulSetStatus(t, g, key, func(sts *appsv1.StatefulSet) bool {
		sts.Status.UpdatedReplicas, sts.Status.CurrentRevision = 2, "tei-new"
		return true
	})
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
}

// setStatefulSetStatus plays the StatefulSet controller: edit changes the
// status of the server's StatefulSet, or returns false to read it again.
func setStatefulSetStatus(t *testing.T, g *WithT, key types.NamespacedName, edit func(*appsv1.StatefulSet) bool) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(t.Context(), key, sts)).To(Succeed())
		g.Expect(edit(sts)).To(BeTrue())
		g.Expect(env.Client.Status().Update(t.Context(), sts)).To(Succeed())
	}).Should(Succeed())
}

func TestCacheBindingMovesWhenThePodsDo(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", fixtures.WithCacheMode(embedopsv1.CacheModeShared)))
	first := cacheBindingOfJob(t, g, namespace)
	completeJob(t, g, populateJobOf(t, g, namespace, first), populated(commitA, digestA))
	g.Eventually(func(g Gomega) {
		g.Expect(getServer(t, g, key).Status.CacheBinding).To(Equal(first))
	}).Should(Succeed())

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	second := ""
	g.Eventually(func(g Gomega) {
		second = cacheBindingOfJob(t, g, namespace, first)
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getServer(t, g, key).Status.CacheBinding).To(Equal(first), "the pods still mount %s while %s is populated", first, second)
		sts := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(t.Context(), key, sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", first)))
	}).Should(Succeed())

	completeJob(t, g, populateJobOf(t, g, namespace, second), populated(commitA, digestA))
	var next *appsv1.StatefulSet
	g.Eventually(func(g Gomega) {
		g.Expect(getServer(t, g, key).Status.CacheBinding).To(Equal(second))
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(2), "the new storage gets a StatefulSet beside the serving one")
		next = &sets[1]
		g.Expect(next.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", second)))
		g.Expect(sets[0].Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", first)),
			"the serving pods keep %s until new ones serve", first)
	}).Should(Succeed())
	markStatefulSetReady(t, g, client.ObjectKeyFromObject(next))
	expectDrainedTo(t, g, namespace, next.Name)
}

// cacheBindingOfJob waits for a populate Job of a binding not in skip and
// returns the binding's name.
func cacheBindingOfJob(t *testing.T, g Gomega, namespace string, skip ...string) string {
	t.Helper()
	var name string
	g.Eventually(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(t.Context(), &jobs, client.InNamespace(namespace))).To(Succeed())
		name = ""
		for _, job := range jobs.Items {
			if binding := job.Labels[embedopsv1.PopulatesLabel]; !contains(skip, binding) {
				name = binding
			}
		}
		g.Expect(name).NotTo(BeEmpty())
	}).Should(Succeed())
	return name
}

// contains reports whether names holds name.
func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

func TestRetriedPopulateJobUsesTheCurrentToken(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace, withPopulator)
	for _, name := range []string{"hf-old", "hf-new"} {
		g.Expect(env.Client.Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Data:       map[string][]byte{"token": []byte("hf_" + name)},
		})).To(Succeed())
	}
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", fixtures.WithCacheMode(embedopsv1.CacheModeShared), fixtures.WithToken("hf-old", "token")))
	binding := cacheBindingOfJob(t, g, namespace)
	job := populateJobOf(t, g, namespace, binding)
	failJob(t, g, job, terminatedPopulate(1, `{"error":"the hub refused the token (401)"}`))
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadFailedReason)

	updateServer(t, g, key, fixtures.WithToken("hf-new", "token"))
	g.Eventually(func(g Gomega) {
		retried := &batchv1.Job{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(job), retried)).To(Succeed())
		g.Expect(retried.UID).NotTo(Equal(job.UID), "the failed Job is retried at once for a new request")
		g.Expect(retried.Spec.Template.Spec.Containers[0].Env).To(ContainElement(HaveField("ValueFrom.SecretKeyRef.Name", "hf-new")))
	}).Should(Succeed())
}
