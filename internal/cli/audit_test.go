package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/decision"
)

const auditedServer = `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: bge
  namespace: models
spec:
  model:
    name: BAAI/bge-small-en-v1.5
  cache:
    size: 20Gi
`

// commitServer makes a repository whose apps/ directory holds one server
// and returns its path and the commit.
func commitServer(t *testing.T) (string, string) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.MkdirAll(filepath.Join(dir, "apps"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "apps", "server.yaml"), []byte(auditedServer), 0o600)).To(Succeed())
	tree, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = tree.Add("apps/server.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	author := &object.Signature{Name: "Ada", Email: "ada@example.com", When: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	hash, err := tree.Commit("Add the bge server", &git.CommitOptions{Author: author})
	g.Expect(err).NotTo(HaveOccurred())
	return dir, hash.String()
}

// recordedBinding writes the binding the controller would record for the
// committed server, changed by tamper, and returns the file.
func recordedBinding(t *testing.T, commit string, tamper func(*embedopsv1.ModelCacheBinding)) string {
	t.Helper()
	g := NewWithT(t)
	servers, err := decision.ServersFromYAML([]byte(auditedServer), "default")
	g.Expect(err).NotTo(HaveOccurred())
	d, err := decision.For(servers[0])
	g.Expect(err).NotTo(HaveOccurred())
	b := &embedopsv1.ModelCacheBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: embedopsv1.GroupVersion.String(), Kind: embedopsv1.ModelCacheBindingKind},
		ObjectMeta: metav1.ObjectMeta{Name: decision.BindingName(d), Namespace: "models"},
		Spec: embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision, Source: embedopsv1.DecisionSource{
			Method: embedopsv1.SourceDeclared, Revision: "main@sha1:" + commit, Commit: commit, Path: "apps",
		}},
	}
	tamper(b)
	data, err := yaml.Marshal(b)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "bindings.yaml")
	g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

func TestAuditVerifiesAndNamesTheOrigin(t *testing.T) {
	g := NewWithT(t)
	repo, commit := commitServer(t)
	file := recordedBinding(t, commit, func(*embedopsv1.ModelCacheBinding) {})
	out, _, err := runCLI("", "audit", "-f", file, "--repo", repo)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Verified"))
	g.Expect(out).To(ContainSubstring(commit[:12]))
	g.Expect(out).To(ContainSubstring("Ada <ada@example.com>"))
	g.Expect(out).To(ContainSubstring("Add the bge server"))
}

func TestAuditReportsATamperedBindingAsMismatch(t *testing.T) {
	g := NewWithT(t)
	repo, commit := commitServer(t)
	file := recordedBinding(t, commit, func(b *embedopsv1.ModelCacheBinding) {
		b.Spec.Decision.RetainFor = metav1.Duration{Duration: time.Hour}
	})
	out, _, err := runCLI("", "audit", "-f", file, "--repo", repo, "-o", "json")
	g.Expect(err).To(MatchError(ErrMismatch))
	g.Expect(ExitCode(err)).To(Equal(1))
	g.Expect(out).To(ContainSubstring(`"result": "Mismatch"`))
	g.Expect(out).To(ContainSubstring("decision.retainFor"))
}

func TestAuditReportsAnUnknownCommitAsUnverifiable(t *testing.T) {
	g := NewWithT(t)
	repo, _ := commitServer(t)
	missing := "0123456789abcdef0123456789abcdef01234567"
	file := recordedBinding(t, missing, func(*embedopsv1.ModelCacheBinding) {})
	out, _, err := runCLI("", "audit", "-f", file, "--repo", repo, "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred(), "Unverifiable is reported, not an error")
	g.Expect(out).To(ContainSubstring("result: Unverifiable"))
}

func TestAuditRefusesBadFlags(t *testing.T) {
	g := NewWithT(t)
	_, _, err := runCLI("", "audit", "-o", "xml")
	g.Expect(IsUsageError(err)).To(BeTrue())
	g.Expect(ExitCode(err)).To(Equal(2))
	_, _, err = runCLI("", "audit", "-f", "x.yaml", "some-binding")
	g.Expect(IsUsageError(err)).To(BeTrue())
	_, _, err = runCLI("", "audit", "-f", "x.yaml", "--ssh-key", filepath.Join(t.TempDir(), "missing"))
	g.Expect(err).To(MatchError(HavePrefix("reading --ssh-key: ")))
}

func TestAuditReadsArgoCDsOwnNamespaceByDefault(t *testing.T) {
	flag := newAuditCommand().Flags().Lookup("argocd-namespace")
	NewWithT(t).Expect(flag.DefValue).To(Equal("argocd"), "Argo CD reads its repository Secrets from its own namespace only")
}

func TestGivenCredentialsReadTheFlagsFilesOverTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	key, hosts := filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	g.Expect(os.WriteFile(key, []byte("key bytes"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(hosts, []byte("hosts"), 0o600)).To(Succeed())
	env := map[string]string{audit.EnvToken: "t", audit.EnvSSHKeyPassword: "kp", audit.EnvCredentialsFor: "git.example.com"}
	given, err := givenCredentials(auditOptions{sshKey: key, knownHosts: hosts, credentialsFor: []string{"ssh://git.example.com:2222/fleet"}}, func(k string) string { return env[k] })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(given.For).To(HaveLen(2))
	g.Expect(given.For[1].String()).To(Equal("ssh://git.example.com:2222/fleet"))
	g.Expect(given.Credentials).To(Equal(audit.Credentials{
		Username: "git", Password: "t", SSHKey: []byte("key bytes"), SSHKeyPassword: "kp", KnownHosts: []byte("hosts"),
		From: "$GIT_TOKEN and --ssh-key " + key, KnownHostsFrom: "--known-hosts " + hosts,
	}))
}

func TestBindingsFromYAMLReadsKubectlLists(t *testing.T) {
	g := NewWithT(t)
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: embedops.dev/v1alpha1\n  kind: ModelCacheBinding\n  metadata: {name: a, namespace: n}\n- apiVersion: embedops.dev/v1alpha1\n  kind: ModelCacheBinding\n  metadata: {name: b, namespace: n}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
	bindings, err := bindingsFromYAML([]byte(list))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bindings).To(HaveLen(2))
	g.Expect(bindings[1].Name).To(Equal("b"))
}
