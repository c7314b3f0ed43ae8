package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"github.com/go-git/go-git/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/harness"
)

// The credentials the test git server asks for; no output may hold them.
const (
	gitUser     = "fleet-reader"
	gitPassword = "pa55-from-the-cluster"
)

// fluxCRDs installs Flux's CRDs into the shared control plane once.
var fluxCRDs struct {
	once sync.Once
	err  error
}

// credentialsFixture is a repository served with basic authentication on
// 127.0.0.1 and a test namespace.
type credentialsFixture struct {
	env        *harness.Env
	kubeconfig string
	namespace  string
	url        string
	commit     string
}

func newCredentialsFixture(t *testing.T) *credentialsFixture {
	t.Helper()
	env, kubeconfig := reconciledCluster(t)
	work, commit := commitServer(t)
	root := t.TempDir()
	if _, err := git.PlainClone(filepath.Join(root, "fleet.git"), true, &git.CloneOptions{URL: work}); err != nil {
		t.Fatalf("making the served bare repository: %v", err)
	}
	server := gittestserver.NewGitServer(root).Auth(gitUser, gitPassword)
	if err := server.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.StopHTTP)
	return &credentialsFixture{
		env: env, kubeconfig: kubeconfig, namespace: harness.Namespace(t, env.Client),
		url: server.HTTPAddress() + "/fleet.git", commit: commit,
	}
}

// create creates objects in the fixture's namespace.
func (f *credentialsFixture) create(t *testing.T, objects ...client.Object) {
	t.Helper()
	for _, object := range objects {
		object.SetNamespace(f.namespace)
		if err := f.env.Client.Create(t.Context(), object); err != nil {
			t.Fatalf("creating %T %s: %v", object, object.GetName(), err)
		}
	}
}

// fluxSource creates the Secret, GitRepository and Kustomization a Flux
// binding of the fixture's repository leads to.
func (f *credentialsFixture) fluxSource(t *testing.T) {
	t.Helper()
	fluxCRDs.once.Do(func() { fluxCRDs.err = harness.InstallFluxCRDs(f.env.Config) })
	if fluxCRDs.err != nil {
		t.Fatal(fluxCRDs.err)
	}
	f.create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-auth"}, Data: map[string][]byte{
			"username": []byte(gitUser), "password": []byte(gitPassword),
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": map[string]any{"name": "fleet"},
			"spec": map[string]any{"url": f.url, "interval": "1m", "secretRef": map[string]any{"name": "git-auth"}},
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": map[string]any{"name": "apps"},
			"spec": map[string]any{"path": "./apps", "interval": "1m", "prune": false, "sourceRef": map[string]any{"kind": "GitRepository", "name": "fleet"}},
		}},
	)
}

// binding is the binding recorded for the committed server when method
// applied it through the object kind/name.
func (f *credentialsFixture) binding(t *testing.T, method embedopsv1.SourceMethod, apiVersion, kind, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	servers, err := decision.ServersFromYAML([]byte(auditedServer), "default")
	if err != nil {
		t.Fatal(err)
	}
	d, err := decision.For(servers[0])
	if err != nil {
		t.Fatal(err)
	}
	return &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: decision.BindingName(d), Namespace: f.namespace},
		Spec: embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision, Source: embedopsv1.DecisionSource{
			Method: method, Revision: "main@sha1:" + f.commit, Commit: f.commit, Repository: f.url, Path: "apps",
			ObjectRef: &embedopsv1.SourceObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: f.namespace, Name: name},
			DecidedAt: metav1.Now(),
		}},
	}
}

// fluxBinding is the binding a Kustomization "apps" recorded.
func (f *credentialsFixture) fluxBinding(t *testing.T) *embedopsv1.ModelCacheBinding {
	return f.binding(t, embedopsv1.SourceFlux, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
}

// auditResults runs `embedops audit` on the namespace with kubeconfig and
// the flags in extra.
func (f *credentialsFixture) auditResults(t *testing.T, kubeconfig string, extra ...string) ([]audit.Result, string) {
	t.Helper()
	args := append([]string{"audit", "--kubeconfig", kubeconfig, "-n", f.namespace, "--cache-dir", t.TempDir(), "-o", "json"}, extra...)
	out, stderr, err := runCLI("", args...)
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, stderr)
	}
	var results []audit.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("decoding %q: %v", out, err)
	}
	if len(results) != 1 {
		t.Fatalf("got %d results, want 1: %s", len(results), out)
	}
	return results, out + stderr
}

func TestAuditClonesWithTheFluxGitRepositorySecret(t *testing.T) {
	g := NewWithT(t)
	f := newCredentialsFixture(t)
	f.fluxSource(t)
	f.create(t, f.fluxBinding(t))

	results, printed := f.auditResults(t, f.kubeconfig)
	g.Expect(results[0].Result).To(Equal(audit.Verified), results[0].Reason)
	g.Expect(results[0].OriginCommit).To(Equal(f.commit))
	g.Expect(printed).NotTo(ContainSubstring(gitPassword))
}

func TestAuditNamesTheSecretItCannotReadAndGoesOn(t *testing.T) {
	g := NewWithT(t)
	f := newCredentialsFixture(t)
	f.fluxSource(t)
	f.create(t, f.fluxBinding(t))
	user := "auditor-" + f.namespace
	f.create(t,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "auditor"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{embedopsv1.GroupVersion.Group}, Resources: []string{"modelcachebindings"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"kustomize.toolkit.fluxcd.io"}, Resources: []string{"kustomizations"}, Verbs: []string{"get"}},
			{APIGroups: []string{"source.toolkit.fluxcd.io"}, Resources: []string{"gitrepositories"}, Verbs: []string{"get"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "auditor"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "auditor"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		},
	)
	kubeconfig := impersonating(t, f.kubeconfig, user)
	cfg := rest.CopyConfig(f.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	auditor, err := client.New(cfg, client.Options{Scheme: f.env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	forbidden := "cannot read Secret " + f.namespace + "/git-auth: forbidden"
	// The role reaches the API server's authorizer through its informers.
	g.Eventually(func() error {
		_, err := (&clusterCredentials{client: auditor}).lookup(t.Context(), f.fluxBinding(t))
		return err
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(MatchError(ContainSubstring(forbidden)))

	results, printed := f.auditResults(t, kubeconfig)
	g.Expect(results[0].Result).To(Equal(audit.Unverifiable))
	g.Expect(results[0].Reason).To(ContainSubstring(forbidden))
	g.Expect(results[0].Reason).To(ContainSubstring("authentication required"))
	g.Expect(printed).To(ContainSubstring("warning: " + forbidden))
	g.Expect(printed).NotTo(ContainSubstring(gitPassword))

	g.Expect(f.env.Client.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "git-auth"}})).To(Succeed())
	results, _ = f.auditResults(t, f.kubeconfig)
	g.Expect(results[0].Result).To(Equal(audit.Unverifiable))
	g.Expect(results[0].Reason).To(ContainSubstring("cannot read Secret " + f.namespace + "/git-auth: not found"))
}

func TestAuditFlagsOverrideTheClusterCredentials(t *testing.T) {
	g := NewWithT(t)
	f := newCredentialsFixture(t)
	f.fluxSource(t)
	f.create(t, f.fluxBinding(t))
	t.Setenv(audit.EnvUsername, gitUser)
	t.Setenv(audit.EnvPassword, "not-the-password")
	host := strings.TrimSuffix(strings.TrimPrefix(f.url, "http://"), "/fleet.git")

	results, printed := f.auditResults(t, f.kubeconfig, "--credentials-for", host, "--allow-insecure-credentials")
	g.Expect(results[0].Result).To(Equal(audit.Unverifiable))
	g.Expect(results[0].Reason).To(ContainSubstring("authentication"))
	g.Expect(printed).NotTo(ContainSubstring("not-the-password"))

	// Given for another host, they are not sent: the cluster's are.
	results, printed = f.auditResults(t, f.kubeconfig, "--credentials-for", "git.example.com")
	g.Expect(results[0].Result).To(Equal(audit.Verified), results[0].Reason)
	g.Expect(printed).To(ContainSubstring("warning: $GIT_USERNAME/$GIT_PASSWORD for git.example.com not sent"))

	// Over plain http, only when the user says so.
	results, _ = f.auditResults(t, f.kubeconfig, "--credentials-for", host)
	g.Expect(results[0].Result).To(Equal(audit.Unverifiable))
	g.Expect(results[0].Reason).To(ContainSubstring("credentials are not sent over plain http"))
}

// argoSecret is an Argo CD repository (kind ArgoRepository) or repo-creds
// (ArgoRepoCreds) Secret for url with the test user and password.
func argoSecret(name, kind, url, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{audit.ArgoSecretTypeLabel: kind}},
		Data:       map[string][]byte{"url": []byte(url), "username": []byte(gitUser), "password": []byte(password)},
	}
}

func TestArgoCredentialsComeFromItsNamespaceSecretsAndKnownHosts(t *testing.T) {
	g := NewWithT(t)
	f := newCredentialsFixture(t)
	// The Application is in the fixture's namespace (Applications in any
	// namespace); Argo CD keeps its Secrets in its own.
	argo := &credentialsFixture{env: f.env, namespace: harness.Namespace(t, f.env.Client)}
	knownHosts := "git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	base := f.url[:len(f.url)-len("/fleet.git")]
	argo.create(t,
		argoSecret("host", audit.ArgoRepoCreds, base, "wrong-shorter-prefix"),
		argoSecret("fleet-creds", audit.ArgoRepoCreds, base+"/fleet", gitPassword),
		argoSecret("other", audit.ArgoRepository, base+"/other.git", "wrong-other-repository"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: audit.ArgoKnownHostsConfigMap}, Data: map[string]string{audit.ArgoKnownHostsKey: knownHosts}},
	)
	f.create(t, argoSecret("in-the-apps-namespace", audit.ArgoRepository, f.url, "wrong-not-argos-namespace"))
	binding := f.binding(t, embedopsv1.SourceArgoCD, "argoproj.io/v1alpha1", "Application", "fleet")
	lookup := (&clusterCredentials{client: f.env.Client, argoNamespace: argo.namespace}).lookup

	creds, err := lookup(t.Context(), binding)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(creds.From).To(Equal("Secret " + argo.namespace + "/fleet-creds"))
	g.Expect(string(creds.KnownHosts)).To(Equal(knownHosts))
	g.Expect(creds.KnownHostsFrom).To(Equal("ConfigMap " + argo.namespace + "/" + audit.ArgoKnownHostsConfigMap))
	opts := audit.RepositoryOptions{CacheDir: t.TempDir(), Lookup: lookup}
	results := audit.All(context.Background(), opts, []embedopsv1.ModelCacheBinding{*binding}, audit.Options{})
	g.Expect(results).To(ConsistOf(HaveField("Result", audit.Verified)))

	creds, err = (&clusterCredentials{client: f.env.Client}).lookup(t.Context(), binding)
	g.Expect(err).NotTo(HaveOccurred(), "no Secrets in namespace argocd is no error")
	g.Expect(creds.From).To(BeEmpty(), "the Application's namespace is never read")

	f.create(t, binding)
	results, printed := f.auditResults(t, f.kubeconfig, "--argocd-namespace", argo.namespace)
	g.Expect(results[0].Result).To(Equal(audit.Verified), results[0].Reason)
	g.Expect(printed).NotTo(ContainSubstring(gitPassword))
	results, _ = f.auditResults(t, f.kubeconfig)
	g.Expect(results[0].Result).To(Equal(audit.Unverifiable), "by default, Argo CD's Secrets are read from namespace argocd")
	g.Expect(results[0].Reason).To(ContainSubstring("authentication required"))
}

// impersonating writes a kubeconfig that acts as user through the
// administrator's one.
func impersonating(t *testing.T, kubeconfig, user string) string {
	t.Helper()
	config, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range config.AuthInfos {
		info.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		t.Fatal(err)
	}
	return path
}
