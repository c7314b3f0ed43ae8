package watch

import (
	"context"
	"reflect"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// labelledPod is a pod of server "tei" with everything the trim drops.
func labelledPod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Name:        name,
			Labels:      map[string]string{embedopsv1.NameLabel: "tei", embedopsv1.NamespaceLabel: namespace},
			Annotations: map[string]string{"big": "annotation"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "embedding", Image: "tei:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
		}}},
	}
}

func TestCacheOptionsRestrictOwnedKindsToLabelledObjects(t *testing.T) {
	g := NewWithT(t)
	options := CacheOptions(nil)
	for _, obj := range []client.Object{&corev1.Pod{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{},
		&policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{}} {
		found := false
		for key, byObject := range options.ByObject {
			if reflect.TypeOf(key) == reflect.TypeOf(obj) {
				found = true
				g.Expect(byObject.Label.String()).To(Equal(embedopsv1.NameLabel), "%T", obj)
				g.Expect(byObject.Transform).NotTo(BeNil(), "%T", obj)
			}
		}
		g.Expect(found).To(BeTrue(), "no cache options for %T", obj)
	}
	g.Expect(options.DefaultTransform).NotTo(BeNil())
}

func TestTrimPodKeepsWhatDiagnosticsRead(t *testing.T) {
	g := NewWithT(t)
	pod := labelledPod("models", "tei-0")
	pod.UID, pod.ResourceVersion = "u1", "7"
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "tei"}}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.Spec.NodeName = "node-1"
	pod.Status = corev1.PodStatus{
		Phase:                 corev1.PodRunning,
		PodIP:                 "10.0.0.1",
		Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		ContainerStatuses:     []corev1.ContainerStatus{{Name: "embedding", RestartCount: 3}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "populate"}},
	}
	out, err := trimPod(pod)
	g.Expect(err).NotTo(HaveOccurred())
	trimmed := out.(*corev1.Pod)
	g.Expect(trimmed.Name).To(Equal("tei-0"))
	g.Expect(trimmed.Namespace).To(Equal("models"))
	g.Expect(trimmed.UID).To(BeEquivalentTo("u1"))
	g.Expect(trimmed.ResourceVersion).To(Equal("7"), "informers compare resource versions")
	g.Expect(trimmed.Labels).To(Equal(pod.Labels))
	g.Expect(trimmed.OwnerReferences).To(Equal(pod.OwnerReferences))
	g.Expect(trimmed.Annotations).To(BeNil())
	g.Expect(trimmed.ManagedFields).To(BeNil())
	g.Expect(trimmed.Spec).To(Equal(corev1.PodSpec{NodeName: "node-1"}))
	g.Expect(trimmed.Status.Phase).To(Equal(corev1.PodRunning))
	g.Expect(trimmed.Status.Conditions).To(Equal(pod.Status.Conditions))
	g.Expect(trimmed.Status.ContainerStatuses).To(Equal(pod.Status.ContainerStatuses))
	g.Expect(trimmed.Status.InitContainerStatuses).To(Equal(pod.Status.InitContainerStatuses))
	g.Expect(trimmed.Status.PodIP).To(BeEmpty())

	again, err := trimPod(trimmed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(trimmed), "a transform must be idempotent")
	tombstone := "not a pod"
	g.Expect(trimPod(tombstone)).To(Equal(tombstone))
}

func TestCacheHoldsOnlyLabelledTrimmedPods(t *testing.T) {
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	ctx := t.Context()
	g.Expect(env.Client.Create(ctx, labelledPod(namespace, "tei-0"))).To(Succeed())
	other := labelledPod(namespace, "unrelated")
	other.Labels = map[string]string{"app": "other"}
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hf", Annotations: map[string]string{"note": "x"}},
		Data:       map[string][]byte{"token": []byte("value")},
	}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())

	options := CacheOptions(nil)
	options.Scheme = env.Scheme
	options.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	informers, err := cache.New(env.Config, options)
	g.Expect(err).NotTo(HaveOccurred())
	cacheCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = informers.Start(cacheCtx) }()
	g.Expect(informers.WaitForCacheSync(ctx)).To(BeTrue())

	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(informers.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "only pods with %s are cached", embedopsv1.NameLabel)
		g.Expect(pods.Items[0].Name).To(Equal("tei-0"))
		g.Expect(pods.Items[0].Annotations).To(BeNil())
		g.Expect(pods.Items[0].Spec.Containers).To(BeEmpty())
	}).Should(Succeed())

}

// A write of a field the installed CRD lacks is refused, not dropped with a
// warning, as kube-apiserver's default validation would: here a field no
// CRD has stands for one an older CRD lacks.
func TestTheClientRefusesFieldsTheCRDLacks(t *testing.T) {
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	options := ClientOptions()
	options.Cache, options.Scheme = nil, env.Scheme
	c, err := client.New(env.Config, options)
	g.Expect(err).NotTo(HaveOccurred())

	server := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": embedopsv1.GroupVersion.String(), "kind": embedopsv1.EmbeddingServerKind,
		"metadata": map[string]any{"namespace": namespace, "name": "tei"},
		"spec":     map[string]any{"model": map[string]any{"name": "BAAI/bge-small-en-v1.5"}, "fieldFromTheFuture": "x"},
	}}
	g.Expect(c.Create(t.Context(), server)).To(MatchError(ContainSubstring(`unknown field "spec.fieldFromTheFuture"`)))
	delete(server.Object["spec"].(map[string]any), "fieldFromTheFuture")
	g.Expect(c.Create(t.Context(), server)).To(Succeed())
}
