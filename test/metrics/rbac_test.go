package metrics

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/embedops/embedops/test/harness"
)

// applyConfigRBAC creates what kustomize renders from config/rbac, and the
// namespaces it names, and returns its objects by kind and name.
func applyConfigRBAC(t *testing.T, g *WithT) map[string]*unstructured.Unstructured {
	t.Helper()
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "rbac"))
	g.Expect(err).NotTo(HaveOccurred(), "kustomize build config/rbac")
	objects := map[string]*unstructured.Unstructured{}
	for _, resource := range resources.Resources() {
		content, err := resource.Map()
		g.Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{Object: content}
		if namespace := obj.GetNamespace(); namespace != "" {
			createIfMissing(t, g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
		}
		createIfMissing(t, g, obj)
		objects[obj.GetKind()+"/"+obj.GetName()] = obj
	}
	return objects
}

// createIfMissing creates obj unless it exists.
func createIfMissing(t *testing.T, g *WithT, obj client.Object) {
	t.Helper()
	err := env.Client.Create(t.Context(), obj)
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred(), "creating %s %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}
}

// serviceAccountToken creates the ServiceAccount if needed and returns a
// token for it from the TokenRequest API.
func serviceAccountToken(ctx context.Context, g *WithT, namespace, name string) string {
	clientset, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := clientset.CoreV1().ServiceAccounts(namespace).Create(ctx, account, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}
	token, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, request, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return token.Status.Token
}

// writeKubeconfig writes a kubeconfig reaching the control plane with a
// bearer token, as a pod's in-cluster configuration would.
func writeKubeconfig(g *WithT, path, token string) {
	config := clientcmdapi.NewConfig()
	config.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	config.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Token: token}
	config.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "controller"}
	config.CurrentContext = "envtest"
	g.Expect(clientcmd.WriteToFile(*config, path)).To(Succeed())
}
