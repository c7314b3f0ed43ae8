package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxcd/gitkit"
	"github.com/fluxcd/pkg/gittestserver"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// servedGitops is the standard history served by a git test server on
// 127.0.0.1, and the binding of commit 4 with the repository's URL.
type servedGitops struct {
	*gitops
	server *gittestserver.GitServer
}

// serveGitops serves the standard history from a git test server.
func serveGitops(t *testing.T) *servedGitops {
	t.Helper()
	requireUploadPack(t)
	repo := newGitops(t)
	return &servedGitops{gitops: repo, server: gittestserver.NewGitServer(filepath.Dir(repo.dir))}
}

// auditAt audits commit 4's binding in a clone of the repository at base
// (the server's address), authenticated with creds given for base's host,
// over plain http too.
func (s *servedGitops) auditAt(t *testing.T, base string, creds Credentials) Result {
	t.Helper()
	url := base + "/" + filepath.Base(s.dir)
	binding := bindingFor(t, prodServer("10Gi"), s.commits[4], withSource(func(src *embedopsv1.DecisionSource) { src.Repository = url }))
	given := givenFor(t, creds, base)
	given.OverHTTP = true
	opts := RepositoryOptions{CacheDir: t.TempDir(), Given: given}
	results := All(context.Background(), opts, []embedopsv1.ModelCacheBinding{*binding}, Options{})
	if len(results) != 1 {
		t.Fatalf("got %d results, want 1", len(results))
	}
	return results[0]
}

// givenFor gives creds for the scheme, host and port of base.
func givenFor(t *testing.T, creds Credentials, base string) *GivenCredentials {
	t.Helper()
	target, ok := parseTarget(base)
	if !ok {
		t.Fatalf("%s is no network URL", base)
	}
	scope, err := ParseCredentialScope(fmt.Sprintf("%s://%s", target.scheme, net.JoinHostPort(target.host, strconv.Itoa(target.port))))
	if err != nil {
		t.Fatal(err)
	}
	return &GivenCredentials{Credentials: creds, For: []CredentialScope{scope}}
}

// verified matches a binding verified back to the commit that added the
// server.
func (s *servedGitops) verified() OmegaMatcher {
	return And(HaveField("Result", Verified), HaveField("OriginCommit", s.commits[1]))
}

// unverifiable matches an Unverifiable result whose reason says why.
func unverifiable(reason string) OmegaMatcher {
	return And(HaveField("Result", Unverifiable), HaveField("Reason", ContainSubstring(reason)))
}

func TestCloneAuthenticatesWithHTTPBasicAuth(t *testing.T) {
	s := serveGitops(t)
	s.server.Auth("embedops", "s3cret-basic")
	if err := s.server.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.server.StopHTTP)
	base := s.server.HTTPAddress()
	cases := []struct {
		name  string
		creds Credentials
		want  OmegaMatcher
	}{
		{name: "right password", creds: Credentials{Username: "embedops", Password: "s3cret-basic"}, want: s.verified()},
		{name: "anonymous", want: unverifiable("authentication required")},
		{name: "wrong password", creds: Credentials{Username: "embedops", Password: "wrong-basic"}, want: unverifiable("authentication")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := s.auditAt(t, base, tc.creds)
			g.Expect(res).To(tc.want)
			g.Expect(res.Reason).NotTo(ContainSubstring("s3cret"))
		})
	}
}

func TestCloneAuthenticatesWithABearerToken(t *testing.T) {
	s := serveGitops(t)
	// gittestserver authenticates HTTP with basic authentication only; a
	// middleware asks for the bearer token as Bitbucket or Gitea do.
	s.server.AddHTTPMiddlewares(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer t0ken" {
				w.Header().Set("WWW-Authenticate", "Bearer")
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	if err := s.server.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.server.StopHTTP)
	g := NewWithT(t)
	g.Expect(s.auditAt(t, s.server.HTTPAddress(), Credentials{BearerToken: "t0ken"})).To(s.verified())
	g.Expect(s.auditAt(t, s.server.HTTPAddress(), Credentials{})).To(unverifiable("authentication required"))
	g.Expect(s.auditAt(t, s.server.HTTPAddress(), Credentials{Username: "git", Password: "t0ken"})).To(unverifiable("authentication required"))
}

func TestCloneAuthenticatesWithAnSSHKeyAndChecksTheHostKey(t *testing.T) {
	s := serveGitops(t)
	authorized, authorizedKey := newSSHKey(t, "key-password")
	_, otherKey := newSSHKey(t, "")
	keyDir := t.TempDir()
	s.server.KeyDir(keyDir).Auth("", "")
	s.server.PublicKeyLookupFunc(func(content string) (*gitkit.PublicKey, error) {
		if content == authorized {
			return &gitkit.PublicKey{Id: "audit"}, nil
		}
		return nil, errors.New("key not authorized")
	})
	t.Cleanup(func() {
		s.server.PublicKeyLookupFunc(func(string) (*gitkit.PublicKey, error) { return &gitkit.PublicKey{Id: "any"}, nil })
	})
	if err := s.server.ListenSSH(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.server.StartSSH() }()
	t.Cleanup(func() {
		if err := s.server.StopSSH(); err != nil {
			t.Error(err)
		}
		if err := <-served; !errors.Is(err, net.ErrClosed) {
			t.Errorf("the SSH server stopped with %v, want its listener closed", err)
		}
	})
	base := s.server.SSHAddress()
	hostKey := serverHostKey(t, s.server, keyDir)
	// The impostor's key is of the host key's type (gitkit's is RSA): a
	// known key of another type makes go-git ask for that type only, and the
	// handshake finds no common algorithm instead.
	impostor, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	impostorKey, err := ssh.NewPublicKey(&impostor.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	known := func(key ssh.PublicKey, host string) []byte {
		return []byte(knownhosts.Line([]string{knownhosts.Normalize(host)}, key) + "\n")
	}
	addr := strings.TrimPrefix(base, "ssh://git@")
	otherHostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorized))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		creds Credentials
		want  OmegaMatcher
	}{
		{
			name:  "authorized key, known host",
			creds: Credentials{SSHKey: authorizedKey, SSHKeyPassword: "key-password", KnownHosts: known(hostKey, addr), From: "Secret a/git", KnownHostsFrom: "Secret a/git"},
			want:  s.verified(),
		},
		{
			name:  "the host presents another key",
			creds: Credentials{SSHKey: authorizedKey, SSHKeyPassword: "key-password", KnownHosts: known(impostorKey, addr), From: "Secret a/git", KnownHostsFrom: "Secret a/git"},
			want:  unverifiable("host key mismatch: " + addr + " presented ssh-rsa"),
		},
		{
			name:  "the host is known by a key of another type",
			creds: Credentials{SSHKey: authorizedKey, SSHKeyPassword: "key-password", KnownHosts: known(otherHostKey, addr), From: "Secret a/git", KnownHostsFrom: "Secret a/git"},
			want:  unverifiable("host key mismatch: the known hosts have no key of a type the server offers"),
		},
		{
			name:  "the host is not known",
			creds: Credentials{SSHKey: authorizedKey, SSHKeyPassword: "key-password", KnownHosts: known(hostKey, "git.example.com"), From: "Secret a/git", KnownHostsFrom: "ConfigMap argocd/argocd-ssh-known-hosts-cm"},
			want:  unverifiable("which is not in ConfigMap argocd/argocd-ssh-known-hosts-cm"),
		},
		{
			name:  "unauthorized key",
			creds: Credentials{SSHKey: otherKey, KnownHosts: known(hostKey, addr), From: "--ssh-key other", KnownHostsFrom: "--known-hosts f"},
			want:  unverifiable("unable to authenticate"),
		},
		{
			name:  "the key's password is missing",
			creds: Credentials{SSHKey: authorizedKey, KnownHosts: known(hostKey, addr), From: "Secret a/git", KnownHostsFrom: "Secret a/git"},
			want:  unverifiable("the SSH key from Secret a/git is encrypted and no password was given"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(s.auditAt(t, base, tc.creds)).To(tc.want)
		})
	}
}

// newSSHKey returns a new ed25519 key, its public half as authorized_keys
// has it and the private key as PEM, encrypted when password is set.
func newSSHKey(t *testing.T, password string) (string, []byte) {
	t.Helper()
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if password == "" {
		block, err = ssh.MarshalPrivateKey(private, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(private, "", []byte(password))
	}
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))), pem.EncodeToMemory(block)
}

// serverHostKey reads the host key the test server generated in its key
// directory.
func serverHostKey(t *testing.T, server *gittestserver.GitServer, keyDir string) ssh.PublicKey {
	t.Helper()
	u, err := url.Parse(server.SSHAddress())
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("the SSH server listens on %q (%v), want 127.0.0.1", server.SSHAddress(), err)
	}
	files, err := filepath.Glob(filepath.Join(keyDir, "*.pub"))
	if err != nil || len(files) != 1 {
		t.Fatalf("want one host key, found %v (%v)", files, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
