package audit

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/gitkit"
	"github.com/fluxcd/pkg/gittestserver"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/testca"
)

// servedSSH is a git server over SSH on 127.0.0.1 recording every public
// key a client offers.
type servedSSH struct {
	base       string
	knownHosts string
	*recorder
}

// serveRecordingSSH serves root over SSH, accepting and recording every
// offered key.
func serveRecordingSSH(t *testing.T, root string) *servedSSH {
	t.Helper()
	s := &servedSSH{recorder: &recorder{}}
	keyDir := t.TempDir()
	// Auth makes gitkit ask for a key, which it looks up with the func.
	server := gittestserver.NewGitServer(root).KeyDir(keyDir).Auth("", "")
	server.PublicKeyLookupFunc(func(content string) (*gitkit.PublicKey, error) {
		s.add(strings.TrimSpace(content))
		return &gitkit.PublicKey{Id: "recorded"}, nil
	})
	if err := server.ListenSSH(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- server.StartSSH() }()
	t.Cleanup(func() {
		if err := server.StopSSH(); err != nil {
			t.Error(err)
		}
		if err := <-served; !errors.Is(err, net.ErrClosed) {
			t.Errorf("the SSH server stopped with %v, want its listener closed", err)
		}
	})
	s.base = server.SSHAddress()
	s.knownHosts = knownhosts.Line([]string{knownhosts.Normalize(strings.TrimPrefix(s.base, "ssh://git@"))}, serverHostKey(t, server, keyDir)) + "\n"
	return s
}

// TestSSHKeysReachOnlyTheHostTheyAreFor: an SSH key given for one server
// is never offered to another, through a binding's repository or an
// include; the server it is for is offered it. Both hosts are known, so
// only the key's scope keeps it from the other.
func TestSSHKeysReachOnlyTheHostTheyAreFor(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "") // no agent's keys either
	root := servingRoot(t)
	trusted, other := serveRecordingSSH(t, root), serveRecordingSSH(t, root)
	f := newLeakFixture(t, root, other.base)
	public, private := newSSHKey(t, "")
	given := givenFor(t, Credentials{SSHKey: private, From: "--ssh-key id"}, trusted.base)
	given.KnownHosts, given.KnownHostsFrom = []byte(trusted.knownHosts+other.knownHosts), "--known-hosts f"
	for _, r := range routes()[:2] {
		t.Run(r.name, func(t *testing.T) {
			g := NewWithT(t)
			trusted.reset()
			other.reset()

			res := auditOne(t, RepositoryOptions{Given: given}, r.binding(t, f, trusted.base, other.base))

			g.Expect(other.seen()).NotTo(ContainElement(public), "result %s: %s", res.Result, res.Reason)
			if r.alsoTrusted {
				g.Expect(trusted.seen()).To(ContainElement(public), "the server it is for is offered it")
			}
		})
	}
}

// servedTLS is a git server over HTTPS on 127.0.0.1 that asks every
// client for a certificate, accepts any, and records the names of those
// presented, and each handshake.
type servedTLS struct {
	base string
	*recorder
}

// serveRecordingTLS serves root over HTTPS with a certificate ca signed.
func serveRecordingTLS(t *testing.T, root string, ca *testca.CA) *servedTLS {
	t.Helper()
	s := &servedTLS{recorder: &recorder{}}
	service := gitkit.New(gitkit.Config{Dir: root})
	if err := service.Setup(); err != nil {
		t.Fatal(err)
	}
	cert, err := ca.KeyPair("git-server")
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(service)
	server.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		// An empty list of acceptable CAs: crypto/tls presents any
		// certificate it holds.
		ClientAuth: tls.RequestClientCert,
		MinVersion: tls.VersionTLS12,
		VerifyConnection: func(state tls.ConnectionState) error {
			s.add("handshake")
			for _, c := range state.PeerCertificates {
				s.add("client certificate " + c.Subject.CommonName)
			}
			return nil
		},
	}
	server.Config.ErrorLog = log.New(io.Discard, "", 0)
	server.StartTLS()
	t.Cleanup(server.Close)
	s.base = server.URL
	if !strings.HasPrefix(s.base, "https://127.0.0.1:") {
		t.Fatalf("the git server listens on %s, not on 127.0.0.1", s.base)
	}
	return s
}

// TestClientCertificatesReachOnlyTheRepositoryTheirToolNames: the client
// certificate of a binding's Flux Secret is presented to its own
// repository only, never to an include or a submodule elsewhere; an
// OCIRepository's, only to a git origin on the registry's own server.
// Every server's CA is trusted, so only the certificate's scope keeps it
// from the other.
func TestClientCertificatesReachOnlyTheRepositoryTheirToolNames(t *testing.T) {
	ca, err := testca.New("embedops-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	root := servingRoot(t)
	trusted, other := serveRecordingTLS(t, root, ca), serveRecordingTLS(t, root, ca)
	f := newLeakFixture(t, root, other.base)
	cert, key, err := ca.Issue("audit-client")
	if err != nil {
		t.Fatal(err)
	}
	tlsSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "git-tls"},
		Data: map[string][]byte{"ca.crt": ca.PEM, "tls.crt": cert, "tls.key": key}}
	gitRepository := func(_ context.Context, b *embedopsv1.ModelCacheBinding) (Credentials, error) {
		return FluxCredentials(tlsSecret, b.Spec.Source.Repository)
	}
	registry := "oci://" + strings.TrimPrefix(trusted.base, "https://") + "/fleet"
	ociRepository := func(_ context.Context, b *embedopsv1.ModelCacheBinding) (Credentials, error) {
		return FluxCertCredentials(tlsSecret, registry, b.Spec.Source.Repository)
	}
	trust := &GivenCredentials{Credentials: Credentials{CABundle: ca.PEM, CABundleFrom: "the test CA"}}
	const presented = "client certificate audit-client"
	cases := []struct {
		route  route
		lookup func(context.Context, *embedopsv1.ModelCacheBinding) (Credentials, error)
	}{
		{route: routes()[1], lookup: gitRepository},
		{route: routes()[2], lookup: gitRepository},
		{route: routes()[3], lookup: ociRepository},
	}
	for _, tc := range cases {
		t.Run(tc.route.name, func(t *testing.T) {
			g := NewWithT(t)
			trusted.reset()
			other.reset()

			res := auditOne(t, RepositoryOptions{Given: trust, Lookup: tc.lookup}, tc.route.binding(t, f, trusted.base, other.base))

			g.Expect(other.seen()).NotTo(BeEmpty(), "the audit asked the other server (result %s: %s)", res.Result, res.Reason)
			g.Expect(other.seen()).NotTo(ContainElement(presented))
			if tc.route.alsoTrusted {
				g.Expect(trusted.seen()).To(ContainElement(presented), "the repository the Secret is for gets it")
			}
		})
	}
	t.Run("an artifact's origin on the registry's server", func(t *testing.T) {
		trusted.reset()
		binding := bindingFor(t, prodServer("10Gi"), f.gitops.commits[4], withArtifact(trusted.base+"/"+filepath.Base(f.gitops.dir)))
		auditOne(t, RepositoryOptions{Given: trust, Lookup: ociRepository}, binding)
		NewWithT(t).Expect(trusted.seen()).To(ContainElement(presented))
	})
}
