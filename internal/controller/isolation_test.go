package controller

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// tenancy is a tenant's namespace beside a victim's, both reconciled by
// one manager, as one controller reconciles every namespace of a cluster.
type tenancy struct {
	tenant, victim string
	requests       *writeCounter
}

// newTenancy starts a parallel test with two namespaces and one manager.
func newTenancy(t *testing.T) (*WithT, *tenancy) {
	t.Helper()
	t.Parallel()
	g := newG(t)
	ten := &tenancy{tenant: harness.Namespace(t, env.Client), victim: harness.Namespace(t, env.Client)}
	ten.requests = startManagerOver(t, []string{ten.tenant, ten.victim}, nil)
	return g, ten
}

// objectRequestsIn are the requests made for one object (not a list or a
// watch of a collection, which the cache makes) of resource in namespace,
// and every write there.
func (ten *tenancy) objectRequestsIn(namespace string, resources ...string) []string {
	var found []string
	for _, request := range ten.requests.requestPaths() {
		method, path, _ := strings.Cut(request, " ")
		_, rest, inNamespace := strings.Cut(path, "/namespaces/"+namespace+"/")
		if !inNamespace {
			continue
		}
		if method != "GET" {
			found = append(found, request)
			continue
		}
		for _, resource := range resources {
			if strings.HasPrefix(rest, resource+"/") {
				found = append(found, request)
			}
		}
	}
	return found
}

// namedObject is an object a server's spec names by name only.
type namedObject struct {
	name string
	// make returns the object, in namespace, as the server needs it.
	make func(namespace string) client.Object
	// resource is its REST resource.
	resource string
}

func hubToken(namespace string) client.Object {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hub-token"}, StringData: map[string]string{"token": "hf_victims"}}
}

func hubCAConfigMap(namespace string) client.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hub-ca"}, Data: map[string]string{"ca.crt": "victim's CA"}}
}

func hubCASecret(namespace string) client.Object {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hub-ca"}, StringData: map[string]string{"ca.crt": "victim's CA"}}
}

// The fields of a server's spec that name an object the controller reads
// (api/v1alpha1 embeddingserver_types.go: model.tokenSecretRef,
// model.caBundleRef, cache.existingClaim) carry a name only, never a
// namespace: the controller reads them in the server's namespace.
func TestAServerReadsWhatItNamesOnlyInItsOwnNamespace(t *testing.T) {
	cases := []struct {
		name    string
		option  fixtures.Option
		object  namedObject
		reason  string
		message func(namespace string) string
	}{
		{
			name: "token Secret", option: fixtures.WithToken("hub-token", "token"),
			object: namedObject{name: "hub-token", make: hubToken, resource: "secrets"}, reason: embedopsv1.SecretNotFoundReason,
			message: func(ns string) string { return "token Secret " + ns + "/hub-token does not exist" },
		},
		{
			name: "CA bundle ConfigMap", option: withCABundle("ConfigMap", "hub-ca", "ca.crt"),
			object: namedObject{name: "hub-ca", make: hubCAConfigMap, resource: "configmaps"}, reason: embedopsv1.CABundleNotFoundReason,
			message: func(ns string) string { return "CA bundle ConfigMap " + ns + "/hub-ca does not exist" },
		},
		{
			name: "CA bundle Secret", option: withCABundle("Secret", "hub-ca", "ca.crt"),
			object: namedObject{name: "hub-ca", make: hubCASecret, resource: "secrets"}, reason: embedopsv1.CABundleNotFoundReason,
			message: func(ns string) string { return "CA bundle Secret " + ns + "/hub-ca does not exist" },
		},
		{
			name: "existing claim", option: fixtures.WithExistingClaim("models"),
			object: namedObject{name: "models", make: boundClaim, resource: "persistentvolumeclaims"}, reason: embedopsv1.ClaimNotFoundReason,
			message: func(ns string) string { return "cache.existingClaim " + ns + "/models does not exist" },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, ten := newTenancy(t)
			victims := []client.Object{createAs(t, g, tc.object.make(ten.victim))}
			key := createServer(t, g, fixtures.EmbeddingServer(ten.tenant, "tei", tc.option))

			waitForStall(t, g, key, tc.reason, tc.message(ten.tenant))
			g.Expect(ten.objectRequestsIn(ten.victim, tc.object.resource)).To(BeEmpty())
			expectUntouched(t, g, victims)

			// The same name in the tenant's own namespace resolves: the
			// stall above was the lookup staying at home.
			createAs(t, g, tc.object.make(ten.tenant))
			waitForCondition(t, g, key, embedopsv1.AcceptedCondition, metav1.ConditionTrue, embedopsv1.ValidReason)
			g.Expect(ten.objectRequestsIn(ten.tenant, tc.object.resource)).To(ContainElement(
				"GET /api/v1/namespaces/" + ten.tenant + "/" + tc.object.resource + "/" + tc.object.name))
			g.Expect(ten.objectRequestsIn(ten.victim, "secrets", "configmaps", "persistentvolumeclaims")).To(BeEmpty())
			expectUntouched(t, g, victims)
		})
	}
}

// The names a server passes to its pods (spec.imagePullSecrets,
// spec.serviceAccountName, a Secret or ConfigMap in spec.env) are not read
// by the controller at all; the kubelet resolves them in the pod's
// namespace (kubernetes v1.37.2 pkg/kubelet/kubelet_pods.go,
// makeEnvironmentVariables: secretManager.GetSecret(pod.Namespace, name)),
// and the pods' StatefulSet is in the server's.
func TestAServerPassesNamesOnlyToPodsOfItsOwnNamespace(t *testing.T) {
	g, ten := newTenancy(t)
	victims := []client.Object{
		createAs(t, g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ten.victim, Name: "registry"}, Type: corev1.SecretTypeDockerConfigJson,
			StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{}}`}}),
		createAs(t, g, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ten.victim, Name: "deployer"}}),
		createAs(t, g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ten.victim, Name: "api-key"}, StringData: map[string]string{"key": "victim's"}}),
	}
	server := fixtures.EmbeddingServer(ten.tenant, "tei", fixtures.WithEnv(corev1.EnvVar{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "api-key"}, Key: "key"},
	}}))
	server.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	server.Spec.ServiceAccountName = "deployer"
	key := createServer(t, g, server)

	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Namespace).To(Equal(ten.tenant))
	pod := sts.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal("deployer"))
	g.Expect(pod.ImagePullSecrets).To(ContainElement(corev1.LocalObjectReference{Name: "registry"}))
	g.Expect(ten.objectRequestsIn(ten.victim, "secrets", "serviceaccounts", "configmaps", "persistentvolumeclaims")).To(BeEmpty())
	expectUntouched(t, g, victims)
}

// Bindings are found by the server's identity, whose sharing domain holds
// its namespace (internal/decision decision.go, sharingDomain), and are
// written in the server's namespace: a server just like another
// namespace's, Shared cache and all, gets a binding and a claim of its own.
func TestAServerNeverUsesABindingOrClaimOfAnotherNamespace(t *testing.T) {
	g, ten := newTenancy(t)
	shared := fixtures.WithCacheMode(embedopsv1.CacheModeShared)
	victimKey := createServer(t, g, fixtures.EmbeddingServer(ten.victim, "search", shared))
	victimBinding := waitForBinding(t, g, victimKey, "")

	tenantKey := createServer(t, g, fixtures.EmbeddingServer(ten.tenant, "search", shared))
	tenantBinding := waitForBinding(t, g, tenantKey, "")
	g.Expect(tenantBinding.Namespace).To(Equal(ten.tenant))
	g.Expect(tenantBinding.Spec.Identity.SharingDomain).NotTo(Equal(victimBinding.Spec.Identity.SharingDomain))
	sts := waitForStatefulSet(t, g, tenantKey)
	g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", tenantBinding.Name)))
	g.Eventually(func() error {
		return env.Client.Get(t.Context(), types.NamespacedName{Namespace: ten.tenant, Name: tenantBinding.Name}, &corev1.PersistentVolumeClaim{})
	}).Should(Succeed())

	tenant := getServer(t, g, tenantKey)
	g.Consistently(func(g Gomega) {
		b := getBinding(t, g, ten.victim, victimBinding.Name)
		g.Expect(b.Status.RequestReferences).To(ConsistOf(HaveField("Namespace", ten.victim)))
		g.Expect(b.Spec.Identity).To(Equal(victimBinding.Spec.Identity))
		g.Expect(b.Spec.Decision.Digest).To(Equal(victimBinding.Spec.Decision.Digest))
		for _, list := range []client.ObjectList{&corev1.PersistentVolumeClaimList{}, &embedopsv1.ModelCacheBindingList{}} {
			g.Expect(env.Client.List(t.Context(), list, client.InNamespace(ten.victim))).To(Succeed())
			g.Expect(list).NotTo(HaveField("Items", ContainElement(tenantsObject(tenant))))
		}
	}).Should(Succeed())
}

// tenantsObject matches an object the tenant's server owns or labels.
func tenantsObject(server *embedopsv1.EmbeddingServer) OmegaMatcher {
	return Or(
		HaveField("ObjectMeta.Labels", HaveKeyWithValue(embedopsv1.NamespaceLabel, server.Namespace)),
		HaveField("ObjectMeta.OwnerReferences", ContainElement(HaveField("UID", server.UID))),
	)
}

// boundClaim is a claim the user filled, Bound once created (createAs
// plays the PV controller).
func boundClaim(namespace string) client.Object {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "models"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

// createAs creates obj as its owner would and returns it as stored; a
// claim with a status phase gets it, as the PV controller would set it.
func createAs(t *testing.T, g *WithT, obj client.Object) client.Object {
	t.Helper()
	claim, isClaim := obj.(*corev1.PersistentVolumeClaim)
	var phase corev1.PersistentVolumeClaimPhase
	if isClaim {
		phase = claim.Status.Phase
	}
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
	if isClaim && phase != "" {
		setClaimPhase(t, g, claim, phase)
	}
	return obj
}

// expectUntouched checks that the objects were not changed since they
// were read: same resourceVersion, so no label, owner or finalizer added.
func expectUntouched(t *testing.T, g *WithT, objects []client.Object) {
	t.Helper()
	for _, obj := range objects {
		stored := obj.DeepCopyObject().(client.Object)
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), stored)).To(Succeed())
		g.Expect(stored.GetResourceVersion()).To(Equal(obj.GetResourceVersion()),
			fmt.Sprintf("%T %s/%s was written", obj, obj.GetNamespace(), obj.GetName()))
	}
}
