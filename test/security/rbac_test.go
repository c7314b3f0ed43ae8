package security

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/embedops/embedops/test/harness"
)

// secretWrites are the verbs that create, change or delete Secrets.
var secretWrites = []string{"create", "update", "patch", "delete", "deletecollection"}

// secretReads are the verbs that read Secrets.
var secretReads = []string{"get", "list", "watch"}

// indirectRoutes are requests that would reach Secrets, or another
// identity's permissions, other than through the Secret API.
var indirectRoutes = []authorizationv1.ResourceAttributes{
	{Verb: "create", Resource: "pods"},
	{Verb: "create", Resource: "pods", Subresource: "exec"},
	{Verb: "create", Resource: "serviceaccounts", Subresource: "token"},
	{Verb: "impersonate", Resource: "serviceaccounts"},
	{Verb: "impersonate", Resource: "users"},
	{Verb: "bind", Group: rbacv1.GroupName, Resource: "clusterroles"},
	{Verb: "escalate", Group: rbacv1.GroupName, Resource: "clusterroles"},
	{Verb: "create", Group: rbacv1.GroupName, Resource: "rolebindings"},
}

// rbacSettle bounds how long the API server takes to authorize with newly
// created roles.
const rbacSettle = 30 * time.Second

func TestControllerCannotWriteSecrets(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	subject := applyRBAC(t)
	namespace := cluster.Namespace(t)
	// The role is in force for this subject: what the controller must do
	// is allowed, so a denial below is the role's, not a wrong subject's.
	g.Eventually(func() (bool, error) {
		return subject.allowed(t.Context(), authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Group: "apps", Resource: "statefulsets"})
	}).WithTimeout(rbacSettle).Should(BeTrue())

	for _, ns := range []string{namespace, subject.namespace, metav1.NamespaceAll} {
		for _, verb := range secretWrites {
			allowed, err := subject.allowed(t.Context(), authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(allowed).To(BeFalse(), "the controller may %s Secrets in namespace %q", verb, ns)
		}
		for _, route := range indirectRoutes {
			route.Namespace = ns
			allowed, err := subject.allowed(t.Context(), route)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(allowed).To(BeFalse(), "the controller may %s %s/%s %s in namespace %q", route.Verb, route.Group, route.Resource, route.Subresource, ns)
		}
	}
	t.Logf("on Secrets, the controller's ServiceAccount may: %s", subject.secretReads(t, g, namespace))
}

// serviceAccount is the controller's ServiceAccount as the authorizer sees it.
type serviceAccount struct {
	namespace, name string
}

// allowed asks the API server whether the ServiceAccount may do attributes.
func (s serviceAccount) allowed(ctx context.Context, attributes authorizationv1.ResourceAttributes) (bool, error) {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + s.namespace + ":" + s.name,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + s.namespace, "system:authenticated"},
		ResourceAttributes: &attributes,
	}}
	answer, err := cluster.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return answer.Status.Allowed, nil
}

// secretReads says which reads of Secrets the ServiceAccount may do, in a
// namespace of its own and in every namespace.
func (s serviceAccount) secretReads(t *testing.T, g *WithT, namespace string) string {
	var report []string
	for _, scope := range []struct{ name, namespace string }{{"in a test namespace", namespace}, {"in every namespace", metav1.NamespaceAll}} {
		var verbs []string
		for _, verb := range secretReads {
			allowed, err := s.allowed(t.Context(), authorizationv1.ResourceAttributes{Namespace: scope.namespace, Verb: verb, Resource: "secrets"})
			g.Expect(err).NotTo(HaveOccurred())
			if allowed {
				verbs = append(verbs, verb)
			}
		}
		report = append(report, scope.name+" ["+strings.Join(verbs, ", ")+"]")
	}
	return strings.Join(report, "; ")
}

// applyRBAC renders config/rbac with kustomize, creates it (and the
// ServiceAccount's namespace) and returns the ServiceAccount the
// ClusterRoleBinding grants the controller's role to.
func applyRBAC(t *testing.T) serviceAccount {
	t.Helper()
	g := NewWithT(t)
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "rbac"))
	g.Expect(err).NotTo(HaveOccurred(), "kustomize build config/rbac")
	var subject serviceAccount
	for _, resource := range resources.Resources() {
		object, err := resource.Map()
		g.Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{Object: object}
		if obj.GetKind() == "ClusterRoleBinding" {
			subject = serviceAccountOf(t, g, obj)
		}
		if namespace := obj.GetNamespace(); namespace != "" {
			createIfMissing(t, g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
		}
		createIfMissing(t, g, obj)
	}
	g.Expect(subject.name).NotTo(BeEmpty(), "config/rbac binds its ClusterRole to no ServiceAccount")
	return subject
}

// serviceAccountOf is the ServiceAccount subject of a ClusterRoleBinding.
func serviceAccountOf(t *testing.T, g *WithT, obj *unstructured.Unstructured) serviceAccount {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, binding)).To(Succeed())
	for _, subject := range binding.Subjects {
		if subject.Kind == rbacv1.ServiceAccountKind {
			return serviceAccount{namespace: subject.Namespace, name: subject.Name}
		}
	}
	return serviceAccount{}
}

// createIfMissing creates obj unless it exists and deletes what it created
// when the test ends.
func createIfMissing(t *testing.T, g *WithT, obj client.Object) {
	t.Helper()
	err := cluster.Client.Create(t.Context(), obj)
	if apierrors.IsAlreadyExists(err) {
		return
	}
	g.Expect(err).NotTo(HaveOccurred(), "creating %s %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), obj) })
}
