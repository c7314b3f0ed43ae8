package audit

import (
	"context"
	"fmt"
	"net/http"
	neturl "net/url"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// credentialedKey marks a context whose HTTP requests carry credentials:
// its value is the repository URL they are for.
type credentialedKey struct{}

// installRedirectCheck installs checkRedirect once, for http and https.
var installRedirectCheck sync.Once

// withRedirectCheck returns ctx for go-git's requests to r: when r sends
// credentials (HTTP authentication or a client certificate), a redirect
// that leaves r's scheme, host and port is refused. go-git v5.19.3 follows
// a redirect of the first request only, to any host, and then strips the
// Authorization header (plumbing/transport/http common.go,
// checkRedirect, stripCredentials), but its transport still presents the
// client certificate to the new host, and the audit would read a
// repository the binding does not name. go-git takes its HTTP client only
// from the process-wide protocol table (plumbing/transport/client
// Protocols), hence the one installation; the check does nothing for a
// context without the mark, which leaves other clones as go-git has them.
func (r remote) withRedirectCheck(ctx context.Context) context.Context {
	if !r.httpURL() || (r.auth == nil && len(r.cert) == 0) {
		return ctx
	}
	installRedirectCheck.Do(func() {
		c := githttp.NewClient(&http.Client{Transport: http.DefaultTransport, CheckRedirect: checkRedirect})
		client.InstallProtocol("http", c)
		client.InstallProtocol("https", c)
	})
	return context.WithValue(ctx, credentialedKey{}, r.url)
}

// httpURL reports whether r is reached over HTTP(S).
func (r remote) httpURL() bool { return r.protocol == "http" || r.protocol == "https" }

// checkRedirect refuses a redirect to another origin (scheme, host or
// port) of a request whose context is marked with credentials. It runs
// after go-git's own check, in its CheckRedirect chain.
func checkRedirect(req *http.Request, via []*http.Request) error {
	repository, ok := req.Context().Value(credentialedKey{}).(string)
	if !ok || len(via) == 0 {
		return nil
	}
	if sameOrigin(via[0].URL, req.URL) {
		return nil
	}
	return fmt.Errorf("refusing the redirect from %s to %s://%s: credentials for %s go to its own host only",
		via[0].URL.Host, req.URL.Scheme, req.URL.Host, DisplayURL(repository))
}

// sameOrigin reports whether two URLs have one scheme, host and port.
func sameOrigin(a, b *neturl.URL) bool {
	return a != nil && b != nil && a.Scheme == b.Scheme && canonicalHost(a.Hostname()) == canonicalHost(b.Hostname()) &&
		urlPort(a) == urlPort(b)
}

// urlPort is a URL's port, defaulted by its scheme.
func urlPort(u *neturl.URL) string {
	if port := u.Port(); port != "" {
		return port
	}
	return fmt.Sprint(portOrDefault(0, u.Scheme))
}
