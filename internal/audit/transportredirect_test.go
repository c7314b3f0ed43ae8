package audit

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/testca"
)

// redirectTo answers every request with a redirect to the same path and
// query on base.
func redirectTo(base string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+r.URL.RequestURI(), http.StatusFound)
	})
}

// TestACredentialedRedirectToAnotherHostIsRefused: go-git follows the
// first request's redirect to any host; with credentials the audit
// refuses it before the other host is asked, whether they are a token
// (which go-git would strip) or a client certificate (which it would
// present); without, the redirect is followed as go-git does.
func TestACredentialedRedirectToAnotherHostIsRefused(t *testing.T) {
	root := servingRoot(t)
	other := serveRecordingHTTP(t, root)
	redirector := httptest.NewServer(redirectTo(other.base))
	t.Cleanup(redirector.Close)
	fleet := newGitops(t)
	binding := bindingFor(t, prodServer("10Gi"), fleet.commits[4], atRepository(redirector.URL, fleet.dir))
	token := givenFor(t, CredentialsFromEnv(env(EnvToken, "t0ken-secret")), redirector.URL)
	token.OverHTTP = true
	refused := "refusing the redirect from " + strings.TrimPrefix(redirector.URL, "http://") + " to " + other.base
	cases := []struct {
		name  string
		given *GivenCredentials
		want  OmegaMatcher
		asked bool
	}{
		{name: "with a token", given: token, want: unverifiable(refused)},
		{name: "anonymous", want: HaveField("Result", Verified), asked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			other.reset()

			res := auditOne(t, RepositoryOptions{Given: tc.given}, binding)

			g.Expect(res).To(tc.want)
			g.Expect(other.seen() != nil).To(Equal(tc.asked), "the other host was asked: %v", other.seen())
			g.Expect(strings.Join(other.seen(), "\n")).NotTo(ContainSubstring("t0ken-secret"))
		})
	}

	t.Run("with a client certificate", func(t *testing.T) {
		g := NewWithT(t)
		ca, err := testca.New("embedops-test-ca")
		g.Expect(err).NotTo(HaveOccurred())
		otherTLS := serveRecordingTLS(t, root, ca)
		serverCert, err := ca.KeyPair("redirector")
		g.Expect(err).NotTo(HaveOccurred())
		tlsRedirector := httptest.NewUnstartedServer(redirectTo(otherTLS.base))
		tlsRedirector.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}
		tlsRedirector.StartTLS()
		t.Cleanup(tlsRedirector.Close)
		cert, key, err := ca.Issue("audit-client")
		g.Expect(err).NotTo(HaveOccurred())
		lookup := func(context.Context, *embedopsv1.ModelCacheBinding) (Credentials, error) {
			return Credentials{CABundle: ca.PEM, CABundleFrom: "Secret a/tls", ClientCert: cert, ClientKey: key, ClientCertFrom: "Secret a/tls"}, nil
		}
		b := bindingFor(t, prodServer("10Gi"), fleet.commits[4], atRepository(tlsRedirector.URL, fleet.dir))

		res := auditOne(t, RepositoryOptions{Lookup: lookup}, b)

		g.Expect(res).To(unverifiable("refusing the redirect from " + strings.TrimPrefix(tlsRedirector.URL, "https://") + " to " + otherTLS.base))
		g.Expect(otherTLS.seen()).To(BeEmpty(), "the other host saw no handshake")
	})
}
