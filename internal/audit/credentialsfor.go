package audit

import (
	"errors"
	"fmt"
	"net/netip"
	neturl "net/url"
	"path"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// EnvCredentialsFor names, comma-separated, the repositories the
// credentials of the environment and flags are for, as
// ParseCredentialScope reads each.
const EnvCredentialsFor = "GIT_CREDENTIALS_FOR"

// CredentialScope is a repository, or every repository under a URL prefix,
// that credentials given by flags and the environment are for. It is
// matched as git matches a credential context (gitcredentials(7): the
// protocol and host, with its port, must be equal, the path is a prefix)
// and as Argo CD matches a repo-creds URL prefix, on whole path segments.
type CredentialScope struct {
	// Scheme is "https", "http" or "ssh"; empty matches each of them.
	Scheme string
	// Host is the host name, lower case, or an IP address.
	Host string
	// Port is the port; 0 means the default port of the URL's scheme.
	Port int
	// Path is a path prefix, cleaned, without a trailing slash or ".git";
	// empty matches every path.
	Path string
	// raw is the scope as written, for messages.
	raw string
}

// String is the scope as the user wrote it.
func (s CredentialScope) String() string { return s.raw }

// ParseCredentialScope reads [SCHEME://]HOST[:PORT][/PATH-PREFIX], e.g.
// "git.example.com/fleet" or "https://git.example.com:8443". A scope with
// user info, a query, a fragment or a wildcard is refused: it names where
// credentials go, never credentials.
func ParseCredentialScope(raw string) (CredentialScope, error) {
	text := strings.TrimSpace(raw)
	scheme, rest, hasScheme := strings.Cut(text, "://")
	if !hasScheme {
		scheme, rest = "", text
	}
	scheme = strings.ToLower(scheme)
	if hasScheme && scheme != "https" && scheme != "http" && scheme != "ssh" {
		return CredentialScope{}, fmt.Errorf("credentials scope %q: scheme %q: use https, http or ssh", raw, scheme)
	}
	parsed, err := neturl.Parse("//" + rest)
	switch {
	case err != nil:
		return CredentialScope{}, fmt.Errorf("credentials scope %q: %w", raw, err)
	case parsed.User != nil || strings.Contains(rest, "@"):
		return CredentialScope{}, fmt.Errorf("credentials scope %q names a user: give credentials by flags or environment, not in the scope", raw)
	case parsed.RawQuery != "" || parsed.Fragment != "" || strings.ContainsAny(rest, "?#*"):
		return CredentialScope{}, fmt.Errorf("credentials scope %q: a scope is a host and a path prefix, with no query, fragment or wildcard", raw)
	case parsed.Hostname() == "":
		return CredentialScope{}, fmt.Errorf("credentials scope %q names no host", raw)
	}
	scope := CredentialScope{Scheme: scheme, Host: canonicalHost(parsed.Hostname()), Path: cleanRepositoryPath(parsed.Path), raw: text}
	if port := parsed.Port(); port != "" {
		if scope.Port, err = strconv.Atoi(port); err != nil || scope.Port < 1 || scope.Port > 65535 {
			return CredentialScope{}, fmt.Errorf("credentials scope %q: port %q", raw, port)
		}
	}
	return scope, nil
}

// ParseCredentialScopes reads a comma-separated list, as EnvCredentialsFor
// holds; empty items are skipped.
func ParseCredentialScopes(list string) ([]CredentialScope, error) {
	var scopes []CredentialScope
	for _, item := range strings.Split(list, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		scope, err := ParseCredentialScope(item)
		if err != nil {
			return nil, err
		}
		scopes = append(scopes, scope)
	}
	return scopes, nil
}

// Matches reports whether credentials for s may be sent to the repository
// at url: same scheme (any of https, http and ssh when s names none), same
// host, same port (the scheme's default when s names none), and a path
// under s's prefix, segment by segment. An HTTP(S) URL with user info
// never matches.
func (s CredentialScope) Matches(url string) bool {
	target, ok := parseTarget(url)
	if !ok {
		return false
	}
	switch {
	case s.Scheme != "" && s.Scheme != target.scheme:
		return false
	case s.Host != target.host:
		return false
	case portOrDefault(s.Port, target.scheme) != target.port:
		return false
	}
	return s.Path == "" || target.path == s.Path || strings.HasPrefix(target.path, s.Path+"/")
}

// target is where a repository URL connects, as scopes compare it.
type target struct {
	scheme, host, path string
	port               int
}

// parseTarget reads a network repository URL (https, http, ssh, or
// scp-like SSH) with go-git's endpoint parser, which is what the clone
// connects to. ok is false for anything else, and for an HTTP(S) URL with
// user info.
func parseTarget(url string) (target, bool) {
	endpoint, err := transport.NewEndpoint(strings.TrimSpace(url))
	if err != nil {
		return target{}, false
	}
	scheme := strings.ToLower(endpoint.Protocol)
	switch {
	case scheme != "https" && scheme != "http" && scheme != "ssh":
		return target{}, false
	case scheme != "ssh" && (endpoint.User != "" || endpoint.Password != ""):
		return target{}, false
	case endpoint.Host == "":
		return target{}, false
	}
	port := endpoint.Port
	if port == 0 {
		port = portOrDefault(0, scheme)
	}
	return target{scheme: scheme, host: canonicalHost(endpoint.Host), port: port, path: cleanRepositoryPath(endpoint.Path)}, true
}

// portOrDefault is port, or the default port of scheme when port is 0.
func portOrDefault(port int, scheme string) int {
	if port != 0 {
		return port
	}
	return map[string]int{"https": 443, "http": 80, "ssh": 22}[scheme]
}

// canonicalHost is a host as scopes compare it: an IP address in netip's
// form (so 127.0.0.1 and its other spellings are one host, as go-git's
// redirect check compares origins), else the name in lower case.
func canonicalHost(host string) string {
	host = strings.Trim(host, "[]")
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr.String()
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// cleanRepositoryPath is a repository path as scopes compare it: rooted,
// cleaned (so ".." cannot climb out of a prefix), without a trailing
// slash or ".git"; "" for the root.
func cleanRepositoryPath(p string) string {
	clean := path.Clean("/" + p)
	clean = strings.TrimSuffix(clean, ".git")
	return strings.TrimSuffix(clean, "/")
}

// GivenCredentials are the credentials of flags and the environment with
// the repositories they are for. Their secrets (the HTTP credentials, the
// SSH key) go only to a repository one of For matches, and over plain
// http only with OverHTTP; known hosts and CA certificates, which are
// public, apply to every repository. Use a pointer: it remembers which
// scopes matched.
type GivenCredentials struct {
	Credentials
	// For are the repositories the secrets are for.
	For []CredentialScope
	// OverHTTP lets the HTTP credentials go over plain http to a matching
	// repository (--allow-insecure-credentials).
	OverHTTP bool
	// matched holds the scopes that matched a repository, by position.
	matched map[int]bool
}

// errInsecureCredentials is why given HTTP credentials are not sent to a
// plain http repository.
var errInsecureCredentials = errors.New("credentials are not sent over plain http: use https, or allow it with --allow-insecure-credentials")

// ForURL returns what of g applies to url: the trust settings always, the
// secrets when a scope matches. A plain http repository that a scope
// matches, with HTTP credentials and without OverHTTP, is an error. A nil
// g gives nothing.
func (g *GivenCredentials) ForURL(url string) (Credentials, error) {
	if g == nil {
		return Credentials{}, nil
	}
	trust := Credentials{KnownHosts: g.KnownHosts, KnownHostsFrom: g.KnownHostsFrom, CABundle: g.CABundle, CABundleFrom: g.CABundleFrom}
	if !g.hasHTTP() && !g.hasSSHKey() && !g.hasClientCert() {
		return trust, nil
	}
	matched := false
	for i, scope := range g.For {
		if scope.Matches(url) {
			if g.matched == nil {
				g.matched = map[int]bool{}
			}
			g.matched[i], matched = true, true
		}
	}
	if !matched {
		return trust, nil
	}
	if target, _ := parseTarget(url); target.scheme == "http" && g.hasHTTP() && !g.OverHTTP {
		return Credentials{}, fmt.Errorf("%s for %s: %w", g.From, DisplayURL(url), errInsecureCredentials)
	}
	return g.Credentials, nil
}

// RepositoryScope is the scope of one repository URL and the
// repositories under its path: what a command that clones the URL the
// user gave (diff --repo) gives credentials for.
func RepositoryScope(url string) (CredentialScope, error) {
	target, ok := parseTarget(url)
	if !ok {
		return CredentialScope{}, fmt.Errorf("%s is not an https, http or ssh repository URL without user info", DisplayURL(url))
	}
	return CredentialScope{Scheme: target.scheme, Host: target.host, Port: target.port, Path: target.path, raw: DisplayURL(url)}, nil
}

// Unmatched are the scopes that matched no repository so far: their
// credentials were not sent anywhere.
func (g *GivenCredentials) Unmatched() []CredentialScope {
	if g == nil || (!g.hasHTTP() && !g.hasSSHKey() && !g.hasClientCert()) {
		return nil
	}
	var unmatched []CredentialScope
	for i, scope := range g.For {
		if !g.matched[i] {
			unmatched = append(unmatched, scope)
		}
	}
	return unmatched
}

// refusedRepository says why a repository URL a binding names is not
// opened: an HTTP(S) URL with user info, or an SSH URL with a password,
// carries credentials the cluster's objects should not hold, and the audit
// would send them to the URL's host; a local path or file:// URL in a
// binding read from the cluster would make the audit read this machine's
// files (fromCluster). A binding from the user's own -f file may name a
// local path.
func refusedRepository(url string, fromCluster bool) error {
	if parsed, err := neturl.Parse(strings.TrimSpace(url)); err == nil && parsed.User != nil {
		_, hasPassword := parsed.User.Password()
		if scheme := strings.ToLower(parsed.Scheme); scheme == "http" || scheme == "https" || hasPassword {
			return fmt.Errorf("the repository URL %s carries credentials (user info): refused; give credentials with --credentials-for", withoutUserInfo(parsed))
		}
	}
	endpoint, err := transport.NewEndpoint(strings.TrimSpace(url))
	if err == nil && endpoint.Protocol == "file" && fromCluster {
		return fmt.Errorf("the repository %s is a local path, named by a binding read from the cluster: refused (audit a local copy with --repo)", url)
	}
	return nil
}

// printableRepository is a repository URL fit for the audit's output:
// without the user info that refusedRepository refuses (an HTTP(S) user,
// often a token, or any password); an SSH user, a URL that does not parse
// or a scp-like address as it is.
func printableRepository(url string) string {
	parsed, err := neturl.Parse(strings.TrimSpace(url))
	if err != nil || parsed.User == nil {
		return url
	}
	_, hasPassword := parsed.User.Password()
	if scheme := strings.ToLower(parsed.Scheme); scheme == "http" || scheme == "https" || hasPassword {
		return withoutUserInfo(parsed)
	}
	return url
}

// withoutUserInfo is a URL fit to print with no user info at all: a token
// is often given as the user name.
func withoutUserInfo(parsed *neturl.URL) string {
	clean := *parsed
	clean.User = nil
	return clean.String()
}
