package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/controller/endpoint"
	"github.com/embedops/embedops/internal/tei"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// withCABundle sets spec.model.caBundleRef.
func withCABundle(kind, name, key string) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Model.CABundleRef = &embedopsv1.CABundleRef{Kind: kind, Name: name, Key: key}
	}
}

func TestServerWaitsForItsCABundle(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	startManager(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "behind-proxy", withCABundle("ConfigMap", "corp-ca", "bundle.pem")))

	server := waitForCondition(t, g, key, embedopsv1.AcceptedCondition, metav1.ConditionFalse, embedopsv1.CABundleNotFoundReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.AcceptedCondition)).To(ContainSubstring("CA bundle ConfigMap " + namespace + "/corp-ca does not exist"))
	g.Expect(conditions.GetReason(server, embedopsv1.StalledCondition)).To(Equal(embedopsv1.CABundleNotFoundReason))
	g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue(), "pods that cannot mount their bundle must not be rolled out")
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "behind-proxy", embedopsv1.CABundleNotFoundReason)).NotTo(BeEmpty())
	}).Should(Succeed())
	checkConditions(t, g, key)

	configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "corp-ca"}, Data: map[string]string{"ca.crt": "PEM"}}
	g.Expect(env.Client.Create(t.Context(), configMap)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.GetMessage(getServer(t, g, key), embedopsv1.AcceptedCondition)).To(ContainSubstring(`has no key "bundle.pem"`))
	}).Should(Succeed())

	configMap.Data["bundle.pem"] = "PEM"
	g.Expect(env.Client.Update(t.Context(), configMap)).To(Succeed())
	waitForCondition(t, g, key, embedopsv1.AcceptedCondition, metav1.ConditionTrue, embedopsv1.ValidReason)
	pod := waitForStatefulSet(t, g, key).Spec.Template.Spec
	g.Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.ConfigMap.Name", "corp-ca")))
	g.Expect(pod.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "SSL_CERT_FILE", Value: "/etc/embedops/ca/ca.crt"}))
}

func TestServerStatefulSetParsesAsTEIParsesIt(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "private", fixtures.WithToken("hf-token", "token")))
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hf-token"}, Data: map[string][]byte{"token": []byte("x")},
	})).To(Succeed())
	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Generation).To(Equal(int64(1)))
	container := sts.Spec.Template.Spec.Containers[0]
	parsed, err := tei.Parse(container.Args, tei.ContainerEnvironment("private-0", container.Env))
	g.Expect(err).NotTo(HaveOccurred(), "TEI would exit with status 2")
	g.Expect(parsed).To(HaveKeyWithValue("hf_token", tei.Given{Value: "from-HF_TOKEN", Source: tei.Environment}))
	// envtest's API server serves IPv4 Services only: the StatefulSet was
	// built once, with the family the Service then got.
	service := &corev1.Service{}
	g.Expect(env.Client.Get(t.Context(), key, service)).To(Succeed())
	g.Expect(service.Spec.IPFamilies).To(Equal([]corev1.IPFamily{corev1.IPv4Protocol}))
	g.Expect(parsed["hostname"].Value).To(Equal("0.0.0.0"))
}

func TestServerNetworkPolicyAdmitsTheEndpointCheck(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	prober, err := endpoint.Prober("embedops-system", endpoint.DefaultProberLabels)
	g.Expect(err).NotTo(HaveOccurred())
	startManager(t, namespace, withEndpointCheck(newTEIStandIn(t)), func(o *ManagerOptions) { o.EmbeddingServer.EndpointProber = prober })
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", withNetworkPolicy()))
	policy := &networkingv1.NetworkPolicy{}
	g.Eventually(func() error { return env.Client.Get(t.Context(), key, policy) }).Should(Succeed())
	g.Expect(policy.Spec.Ingress).To(ContainElement(HaveField("From", Equal([]networkingv1.NetworkPolicyPeer{*prober}))),
		"the controller's pods ask /info from another namespace: without this rule the server never becomes Ready")
}

func TestCacheClaimsLoseGitOpsTrackingLabels(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	waitForStatefulSet(t, g, key)
	binding := getServer(t, g, key).Status.CacheBinding
	g.Eventually(func(g Gomega) { binding = getServer(t, g, key).Status.CacheBinding; g.Expect(binding).NotTo(BeEmpty()) }).Should(Succeed())
	// A claim as a StatefulSet of the previous release made it.
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cache-tei-0", Labels: map[string]string{
			builder.AppInstanceLabel: "tei", embedopsv1.NameLabel: "tei", embedopsv1.NamespaceLabel: namespace,
			embedopsv1.CacheBindingLabel: binding, "team": "search",
		}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
	requestReconcile(t, g, key)
	g.Eventually(func(g Gomega) {
		got := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(t.Context(), types.NamespacedName{Namespace: namespace, Name: claim.Name}, got)).To(Succeed())
		g.Expect(got.Labels).NotTo(HaveKey(builder.AppInstanceLabel), "Argo CD's label tracking would prune it")
		g.Expect(got.Labels).To(HaveKeyWithValue("team", "search"))
		g.Expect(got.Labels).To(HaveKeyWithValue(embedopsv1.CacheBindingLabel, binding))
	}).Should(Succeed())
}

func TestKeepLiveClaimTemplatesSparesTheStatefulSet(t *testing.T) {
	g := newG(t)
	template := func(name string, labels map[string]string, size string) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			}},
		}
	}
	old := map[string]string{builder.AppInstanceLabel: "s", "a": "b"}
	live := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{template("cache-1", old, "10Gi")}}}
	desired := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{template("cache-1", map[string]string{"a": "b"}, "10Gi")}}}
	keepLiveClaimTemplates(desired, live)
	g.Expect(desired.Spec.VolumeClaimTemplates).To(Equal(live.Spec.VolumeClaimTemplates), "labels alone never replace the StatefulSet")

	desired = &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{template("cache-1", map[string]string{"a": "b"}, "20Gi")}}}
	keepLiveClaimTemplates(desired, live)
	g.Expect(desired.Spec.VolumeClaimTemplates).To(Equal(live.Spec.VolumeClaimTemplates), "a size grown in place keeps the template; the claims are expanded")

	other := template("cache-2", map[string]string{"a": "b"}, "20Gi")
	desired = &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{other}}}
	keepLiveClaimTemplates(desired, live)
	g.Expect(desired.Spec.VolumeClaimTemplates).To(Equal([]corev1.PersistentVolumeClaim{other}), "another storage's template is the desired one")
	keepLiveClaimTemplates(desired, nil)
}

func TestServerWithAProxyNoClientCanUseStalls(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "proxied",
		fixtures.WithEnv(corev1.EnvVar{Name: "HTTPS_PROXY", Value: "ftp://proxy.corp:21"})))
	server := waitForCondition(t, g, key, embedopsv1.StalledCondition, metav1.ConditionTrue, embedopsv1.ConfigurationInvalidReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.StalledCondition)).To(ContainSubstring(`env HTTPS_PROXY="ftp://proxy.corp:21": scheme "ftp"`))
	g.Expect(isNotFound(t, &appsv1.StatefulSet{}, key)()).To(BeTrue())
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "proxied", embedopsv1.ConfigurationInvalidReason)).NotTo(BeEmpty())
	}).Should(Succeed())

	updateServer(t, g, key, func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "proxy.corp:3128"}}
	})
	waitForCondition(t, g, key, embedopsv1.AcceptedCondition, metav1.ConditionTrue, embedopsv1.ValidReason)
	waitForStatefulSet(t, g, key)
}
