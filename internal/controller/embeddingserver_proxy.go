package controller

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// proxyVariables are the variables TEI's HTTP client (reqwest
// src/proxy.rs) and the populator (golang.org/x/net/http/httpproxy) take a
// proxy URL from.
var proxyVariables = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// proxySchemes are the proxy schemes both clients support.
var proxySchemes = []string{"http", "https", "socks5", "socks5h"}

// proxyProblem says which literal proxy variable of spec.env neither TEI
// nor the populator could use, or "". Both read a URL or a bare host:port,
// which they take as http://host:port (httpproxy.parseProxy retries with
// "http://" prepended; here only a value without "://" is, so "http://"
// alone is refused, not read as host "http:"); a value that is neither
// makes every download fail.
// Values from a Secret or ConfigMap are not seen here.
func proxyProblem(server *embedopsv1.EmbeddingServer) string {
	for _, e := range server.Spec.Env {
		if !slices.Contains(proxyVariables, e.Name) || e.ValueFrom != nil || e.Value == "" {
			continue
		}
		if err := checkProxyURL(e.Value); err != nil {
			return fmt.Sprintf("env %s=%q: %v", e.Name, e.Value, err)
		}
	}
	return ""
}

// checkProxyURL parses a proxy variable's value as httpproxy does and
// checks that it names a host with a supported scheme.
func checkProxyURL(value string) error {
	if strings.ContainsAny(value, " \t\n") {
		return fmt.Errorf("a proxy URL has no spaces")
	}
	if !strings.Contains(value, "://") {
		value = "http://" + value
	}
	parsed, err := url.Parse(value)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL or host:port: %w", err)
	case !slices.Contains(proxySchemes, parsed.Scheme):
		return fmt.Errorf("scheme %q is not one of %s", parsed.Scheme, strings.Join(proxySchemes, ", "))
	case parsed.Hostname() == "":
		return fmt.Errorf("no proxy host")
	case parsed.Path != "" && parsed.Path != "/":
		return fmt.Errorf("a proxy URL has no path")
	}
	return nil
}
