package audit

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/audit/audittest"
	"github.com/embedops/embedops/test/testca"
)

// tlsFixture is the standard history served over HTTPS on 127.0.0.1 by a
// server that asks for a client certificate, with certificates of its CA
// and of another one.
type tlsFixture struct {
	*servedGitops
	server *audittest.TLSGitServer
	ca     []byte
	// cert and key are a client certificate the server accepts.
	cert, key []byte
	// otherCA signed otherCert and otherKey, which the server refuses.
	otherCA, otherCert, otherKey []byte
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	served := serveGitops(t)
	ca, err := testca.New("embedops-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testca.New("another-ca")
	if err != nil {
		t.Fatal(err)
	}
	server, err := audittest.ServeTLSGit(filepath.Dir(served.dir), ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	f := &tlsFixture{servedGitops: served, server: server, ca: ca.PEM, otherCA: other.PEM}
	if f.cert, f.key, err = ca.Issue("audit"); err != nil {
		t.Fatal(err)
	}
	if f.otherCert, f.otherKey, err = other.Issue("stranger"); err != nil {
		t.Fatal(err)
	}
	return f
}

// host is the server's host:port.
func (f *tlsFixture) host() string { return strings.TrimPrefix(f.server.URL, "https://") }

// secretMaterial fails the test when text holds any of the PEM given, or
// any line of it.
func secretMaterial(t *testing.T, text string, pems ...[]byte) {
	t.Helper()
	for _, p := range pems {
		for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
			if strings.HasPrefix(line, "-----") {
				continue
			}
			if strings.Contains(text, line) {
				t.Fatalf("%q holds a line of a certificate or key", text)
			}
		}
	}
	if strings.Contains(text, "PRIVATE KEY") || strings.Contains(text, "BEGIN CERTIFICATE") {
		t.Fatalf("%q holds PEM", text)
	}
}

func TestCloneTrustsTheCAAndPresentsTheClientCertificate(t *testing.T) {
	f := newTLSFixture(t)
	tls := func(ca, cert, key []byte) Credentials {
		return Credentials{CABundle: ca, CABundleFrom: "Secret flux-system/git-tls", ClientCert: cert, ClientKey: key, ClientCertFrom: "Secret flux-system/git-tls"}
	}
	cases := []struct {
		name  string
		creds Credentials
		want  OmegaMatcher
	}{
		{name: "the CA and a client certificate it signed", creds: tls(f.ca, f.cert, f.key), want: f.verified()},
		{
			name: "no CA", creds: tls(nil, f.cert, f.key),
			want: unverifiable("TLS: the certificate of " + f.host() + " is not signed by a trusted CA (trusted: the system's): "),
		},
		{
			name: "another CA", creds: tls(f.otherCA, f.cert, f.key),
			want: And(
				unverifiable("TLS: the certificate of "+f.host()+" is not signed by a trusted CA (trusted: the system's and those of Secret flux-system/git-tls)"),
				unverifiable("x509: certificate signed by unknown authority")),
		},
		{
			name: "no client certificate", creds: tls(f.ca, nil, nil),
			want: unverifiable("TLS: " + f.host() + " refused the connection: it asks for a client certificate, and none was given"),
		},
		{
			name: "a client certificate of another CA", creds: tls(f.ca, f.otherCert, f.otherKey),
			want: unverifiable("TLS: " + f.host() + " refused the connection: it asks for a client certificate, and the one from Secret flux-system/git-tls is not signed by a CA it accepts"),
		},
		{
			name: "a key of another certificate", creds: tls(f.ca, f.cert, f.otherKey),
			want: unverifiable("reading the client certificate and key from Secret flux-system/git-tls: tls: private key does not match public key"),
		},
		{
			name: "a certificate without its key", creds: tls(f.ca, f.cert, nil),
			want: unverifiable("the client certificate from Secret flux-system/git-tls has no key"),
		},
		{
			name: "a CA bundle that is not PEM", creds: tls(f.key[:40], f.cert, f.key),
			want: unverifiable("the CA certificates from Secret flux-system/git-tls hold no PEM certificate"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := f.auditAt(t, f.server.URL, tc.creds)
			NewWithT(t).Expect(res).To(tc.want)
			secretMaterial(t, res.Reason, f.cert, f.key, f.otherCert, f.otherKey)
		})
	}
}

func TestTLSSettingsAreForHTTPSOnly(t *testing.T) {
	g := NewWithT(t)
	creds := Credentials{CABundle: []byte("not PEM"), CABundleFrom: "Secret a/b", ClientCert: []byte("c"), ClientCertFrom: "Secret a/b"}
	for _, url := range []string{"http://git.example.com/x.git", "ssh://git@git.example.com/x", "file:///srv/x.git"} {
		r, err := creds.remoteFor(url)
		g.Expect(err).NotTo(HaveOccurred(), url)
		g.Expect(r.listOptions().CABundle).To(BeEmpty(), url)
		g.Expect(r.fetchOptions().ClientCert).To(BeEmpty(), url)
	}
	_, err := creds.remoteFor("https://git.example.com/x.git")
	g.Expect(err).To(MatchError("the CA certificates from Secret a/b hold no PEM certificate"))
}

func TestResolveRevisionAsksTheRemoteHeadOverTLS(t *testing.T) {
	g := NewWithT(t)
	f := newTLSFixture(t)
	creds := Credentials{CABundle: f.ca, CABundleFrom: "Secret a/tls", ClientCert: f.cert, ClientKey: f.key, ClientCertFrom: "Secret a/tls"}
	opts := RepositoryOptions{URL: f.server.URL + "/" + filepath.Base(f.dir), CacheDir: t.TempDir(), Credentials: creds}
	repo, err := OpenRepository(t.Context(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	head, err := ResolveRevision(t.Context(), repo, opts, "HEAD")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head).To(Equal(f.commits[len(f.commits)-1]))

	opts.Credentials.ClientCert, opts.Credentials.ClientKey = nil, nil
	_, err = ResolveRevision(t.Context(), repo, opts, "HEAD")
	g.Expect(err).To(MatchError(ContainSubstring("listing the references of " + opts.URL + ": TLS: " + f.host() + " refused the connection")))
}
