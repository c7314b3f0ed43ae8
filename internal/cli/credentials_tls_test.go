package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/audit/audittest"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/testca"
)

// tlsFixture is the committed server's repository served over HTTPS on
// 127.0.0.1 by a server whose certificate a private CA signed and that
// asks for a client certificate of the same CA.
type tlsFixture struct {
	*credentialsFixture
	ca, cert, key []byte
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	env, kubeconfig := reconciledCluster(t)
	work, commit := commitServer(t)
	root := t.TempDir()
	if _, err := git.PlainClone(filepath.Join(root, "fleet.git"), true, &git.CloneOptions{URL: work}); err != nil {
		t.Fatalf("making the served bare repository: %v", err)
	}
	ca, err := testca.New("fleet-ca")
	if err != nil {
		t.Fatal(err)
	}
	server, err := audittest.ServeTLSGit(root, ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	f := &tlsFixture{credentialsFixture: &credentialsFixture{
		env: env, kubeconfig: kubeconfig, namespace: harness.Namespace(t, env.Client), url: server.URL + "/fleet.git", commit: commit,
	}, ca: ca.PEM}
	if f.cert, f.key, err = ca.Issue("auditor"); err != nil {
		t.Fatal(err)
	}
	return f
}

// noSecretMaterial fails the test when printed holds a line of the client
// certificate or of its key.
func (f *tlsFixture) noSecretMaterial(t *testing.T, printed string) {
	t.Helper()
	for _, pem := range [][]byte{f.cert, f.key} {
		for _, line := range strings.Split(strings.TrimSpace(string(pem)), "\n") {
			if !strings.HasPrefix(line, "-----") && strings.Contains(printed, line) {
				t.Fatalf("the output holds a line of a PEM block: %s", printed)
			}
		}
	}
}

// fluxSources creates Flux's CRDs and objects in the fixture's namespace.
func (f *tlsFixture) fluxSources(t *testing.T, objects ...*unstructured.Unstructured) {
	t.Helper()
	fluxCRDs.once.Do(func() { fluxCRDs.err = harness.InstallFluxCRDs(f.env.Config) })
	if fluxCRDs.err != nil {
		t.Fatal(fluxCRDs.err)
	}
	for _, object := range objects {
		f.create(t, object)
	}
}

// kustomization is a Kustomization "apps" applying from the source kind/name.
func kustomization(kind, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": map[string]any{"name": "apps"},
		"spec": map[string]any{"path": "./apps", "interval": "1m", "prune": false, "sourceRef": map[string]any{"kind": kind, "name": name}},
	}}
}

func TestAuditClonesOverTLSWithTheGitRepositorySecret(t *testing.T) {
	g := NewWithT(t)
	f := newTLSFixture(t)
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-tls"}, Data: map[string][]byte{
		"ca.crt": f.ca, "tls.crt": f.cert, "tls.key": f.key,
	}})
	f.fluxSources(t,
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": map[string]any{"name": "fleet"},
			"spec": map[string]any{"url": f.url, "interval": "1m", "secretRef": map[string]any{"name": "git-tls"}},
		}},
		kustomization("GitRepository", "fleet"),
	)
	f.create(t, f.fluxBinding(t))

	results, printed := f.auditResults(t, f.kubeconfig)
	g.Expect(results[0].Result).To(Equal(audit.Verified), results[0].Reason)
	f.noSecretMaterial(t, printed)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "git-tls"}}
	g.Expect(f.env.Client.Delete(t.Context(), secret)).To(Succeed())
	results, printed = f.auditResults(t, f.kubeconfig)
	host := strings.TrimPrefix(strings.TrimSuffix(f.url, "/fleet.git"), "https://")
	g.Expect(results[0].Result).To(Equal(audit.Unverifiable))
	g.Expect(results[0].Reason).To(ContainSubstring("TLS: the certificate of " + host + " is not signed by a trusted CA"))
	g.Expect(results[0].Reason).To(ContainSubstring("x509: certificate signed by unknown authority"))
	f.noSecretMaterial(t, printed)
}

func TestAuditClonesAnArtifactsOriginWithTheOCIRepositoryCertSecret(t *testing.T) {
	g := NewWithT(t)
	f := newTLSFixture(t)
	f.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry-tls"}, Data: map[string][]byte{
		"ca.crt": f.ca, "tls.crt": f.cert, "tls.key": f.key,
	}})
	// The registry and the git server are one server, host and port: its
	// client certificate is presented to both.
	registry := "oci://" + strings.TrimSuffix(strings.TrimPrefix(f.url, "https://"), "/fleet.git") + "/fleet"
	f.fluxSources(t,
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "metadata": map[string]any{"name": "fleet"},
			"spec": map[string]any{"url": registry, "interval": "1m", "certSecretRef": map[string]any{"name": "registry-tls"}},
		}},
		kustomization("OCIRepository", "fleet"),
	)
	binding := f.fluxBinding(t)
	binding.Spec.Source.Artifact = "sha256:" + strings.Repeat("ab", 32)
	f.create(t, binding)

	results, printed := f.auditResults(t, f.kubeconfig)
	g.Expect(results[0].Result).To(Equal(audit.Verified), results[0].Reason)
	f.noSecretMaterial(t, printed)
}

func TestAuditClonesOverTLSWithArgoCDsCertificatesAndClientCertificate(t *testing.T) {
	g := NewWithT(t)
	f := newTLSFixture(t)
	argo := &credentialsFixture{env: f.env, namespace: harness.Namespace(t, f.env.Client)}
	repository := argoSecret("fleet", audit.ArgoRepository, f.url, "")
	repository.Data = map[string][]byte{"url": []byte(f.url), "tlsClientCertData": f.cert, "tlsClientCertKey": f.key}
	certs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: audit.ArgoTLSCertsConfigMap}, Data: map[string]string{"127.0.0.1": string(f.ca)}}
	argo.create(t, repository, certs)
	f.create(t, f.binding(t, embedopsv1.SourceArgoCD, "argoproj.io/v1alpha1", "Application", "fleet"))

	results, printed := f.auditResults(t, f.kubeconfig, "--argocd-namespace", argo.namespace)
	g.Expect(results[0].Result).To(Equal(audit.Verified), results[0].Reason)
	f.noSecretMaterial(t, printed)

	g.Expect(f.env.Client.Delete(t.Context(), certs)).To(Succeed())
	results, printed = f.auditResults(t, f.kubeconfig, "--argocd-namespace", argo.namespace)
	g.Expect(results[0].Result).To(Equal(audit.Unverifiable))
	g.Expect(results[0].Reason).To(ContainSubstring("is not signed by a trusted CA (trusted: the system's)"))
	f.noSecretMaterial(t, printed)
}
