package audit

import (
	neturl "net/url"
	"slices"
	"strings"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// DeclaredHosts are the hosts a Declared binding's repository may be
// fetched from. A declared repository is whatever the server's author
// wrote into an annotation, so cloning it would let any namespace user
// send the audit (and the credentials it holds) to a host of their choice,
// or make it read a path on the machine it runs on. Attested bindings are
// not checked: their repository is the GitOps tool's.
type DeclaredHosts struct {
	// Cluster maps each host the cluster's Flux sources and Argo CD
	// Applications fetch from to one object that uses it, which says why
	// the host is trusted.
	Cluster map[string]string
	// Allowed are host names the user allows besides.
	Allowed []string
}

// refusal says why the source's repository may not be fetched, or "".
// Only Declared sources are checked.
func (h *DeclaredHosts) refusal(source embedopsv1.DecisionSource) string {
	if h == nil || source.Method != embedopsv1.SourceDeclared {
		return ""
	}
	host := RepositoryHost(source.Repository)
	switch {
	case host == "":
		return "the declared repository " + DisplayURL(source.Repository) +
			" names no network host: a declared source is not read from this machine's files (audit a local copy with --repo)"
	case h.Cluster[host] != "" || slices.ContainsFunc(h.Allowed, func(a string) bool { return strings.EqualFold(hostName(a), host) }):
		return ""
	}
	return "the declared repository " + DisplayURL(source.Repository) + " is on " + host +
		", which no Flux source or Argo CD Application of the cluster uses and which is not allowed: a declared source is fetched only from those hosts"
}

// RepositoryHost is the lower-case host name, without port or user, of a
// git URL: "https://host/x", "ssh://git@host:22/x" or scp-like
// "git@host:x". It is "" for a local path or a file:// URL.
func RepositoryHost(repository string) string {
	repository = strings.TrimSpace(repository)
	if !strings.Contains(repository, "://") {
		// scp-like syntax, as git reads it (git's connect.c,
		// parse_connect_url): a colon before any slash.
		userHost, _, found := strings.Cut(repository, ":")
		if !found || strings.Contains(userHost, "/") {
			return ""
		}
		_, host, _ := strings.Cut(userHost, "@")
		if host == "" {
			host = userHost
		}
		return strings.ToLower(host)
	}
	parsed, err := neturl.Parse(repository)
	if err != nil || strings.EqualFold(parsed.Scheme, "file") {
		return ""
	}
	return strings.ToLower(parsed.Hostname())
}

// hostName is the lower-case host name of an allowed host, written as
// "host" or "host:port".
func hostName(allowed string) string {
	host, _, _ := strings.Cut(strings.TrimSpace(allowed), ":")
	return strings.ToLower(host)
}
