package populate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// The default client reads the proxy settings and the certificate roots
// from the environment once per process, so the tests of both run populate
// in a child process: the test binary itself, started with childDirEnv set.

// childDirEnv names the variable that makes the test binary populate
// testModel into the directory it holds, print the result and exit.
const childDirEnv = "EMBEDOPS_POPULATE_CHILD_DIR"

// unresolvedHost is the hub's name in the proxy tests: a name that never
// resolves, reached only through the loopback proxy.
const unresolvedHost = "hub.invalid"

// refusedLookup is what the child prints when it would have sent a DNS query.
const refusedLookup = "the test resolver sends no DNS query"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(populateChild(dir))
	}
	os.Exit(m.Run())
}

// populateChild runs populate as `embedops populate` would, with the default
// client and the options of the environment, but neither retries nor waits.
// Its resolver refuses to send DNS queries, so no name leaves the machine.
func populateChild(dir string) int {
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		fmt.Fprintln(os.Stderr, refusedLookup)
		return nil, errors.New(refusedLookup)
	}}
	opts, err := populate.EnvOptions(os.Getenv)
	if err == nil {
		opts.Model, opts.Revision, opts.Dir, opts.MaxAttempts = testModel, "main", dir, 1
		var result *populate.Result
		if result, err = populate.Run(context.Background(), opts); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(result)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runChild runs populateChild with the environment of the test without its
// network settings, plus env, and returns its result or its error output.
func runChild(t *testing.T, env map[string]string) (*populate.Result, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(withoutNetworkSettings(os.Environ()), childDirEnv+"="+t.TempDir())
	for name, value := range env {
		cmd.Env = append(cmd.Env, name+"="+value)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, stderr.String()
	}
	var result populate.Result
	if err := json.Unmarshal([]byte(stdout.String()), &result); err != nil {
		t.Fatalf("decoding the child's result %q: %v", stdout.String(), err)
	}
	return &result, stderr.String()
}

// withoutNetworkSettings drops the hub, proxy and certificate settings from
// an environment.
func withoutNetworkSettings(env []string) []string {
	dropped := []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "REQUEST_METHOD", "SSL_CERT_FILE", "SSL_CERT_DIR"}
	var kept []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if !strings.HasPrefix(upper, "HF_") && !slices.Contains(dropped, upper) {
			kept = append(kept, kv)
		}
	}
	return kept
}

// proxy is a loopback forward proxy that serves unresolvedHost from a hub
// and refuses every other host: plain HTTP requests in absolute form, and
// CONNECT tunnels to port 443 for HTTPS.
type proxy struct {
	hub      *url.URL
	mu       sync.Mutex
	requests []string
}

// newProxy starts a proxy in front of hub and returns its URL.
func newProxy(t *testing.T, hub *hubtest.Hub) (*proxy, string) {
	target, err := url.Parse(hub.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{hub: target}
	server := httptest.NewServer(p)
	t.Cleanup(server.Close)
	return p, server.URL
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests = append(p.requests, r.Method+" "+r.RequestURI)
	p.mu.Unlock()
	switch {
	case r.Method == http.MethodConnect && r.Host == unresolvedHost+":443":
		p.tunnel(w)
	case r.Method != http.MethodConnect && r.URL.Host == unresolvedHost:
		forward := httputil.ReverseProxy{Rewrite: func(out *httputil.ProxyRequest) { out.SetURL(p.hub) }}
		forward.ServeHTTP(w, r)
	default:
		http.Error(w, "this proxy serves "+unresolvedHost+" only", http.StatusForbidden)
	}
}

// tunnel joins a CONNECT request's connection to the hub's.
func (p *proxy) tunnel(w http.ResponseWriter) {
	upstream, err := net.Dial("tcp", p.hub.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer upstream.Close()
	conn, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	go copyThenClose(upstream, buffered.Reader)
	_, _ = io.Copy(conn, upstream)
}

// copyThenClose copies src to dst, then closes dst for writing.
func copyThenClose(dst net.Conn, src *bufio.Reader) {
	_, _ = io.Copy(dst, src)
	if tcp, ok := dst.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
}

func (p *proxy) received() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

func TestRunGoesThroughTheProxyTheEnvironmentNames(t *testing.T) {
	cases := []struct {
		name    string
		env     func(proxyURL string) map[string]string
		proxied bool
	}{
		{"HTTP_PROXY", func(p string) map[string]string { return map[string]string{"HTTP_PROXY": p} }, true},
		{"http_proxy", func(p string) map[string]string { return map[string]string{"http_proxy": p} }, true},
		{"NO_PROXY names the hub", func(p string) map[string]string {
			return map[string]string{"HTTP_PROXY": p, "NO_PROXY": unresolvedHost}
		}, false},
		{"no_proxy names the hub", func(p string) map[string]string {
			return map[string]string{"http_proxy": p, "no_proxy": ".invalid"}
		}, false},
		{"no proxy", func(string) map[string]string { return map[string]string{} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub, commit := newHub(t)
			p, proxyURL := newProxy(t, hub)
			env := tc.env(proxyURL)
			env[populate.EnvEndpoint] = "http://" + unresolvedHost

			result, stderr := runChild(t, env)

			if !tc.proxied {
				g.Expect(result).To(BeNil())
				g.Expect(stderr).To(ContainSubstring("lookup " + unresolvedHost))
				g.Expect(stderr).To(ContainSubstring(refusedLookup), "the child asked to resolve the name, and sent nothing")
				g.Expect(p.received()).To(BeEmpty())
				return
			}
			g.Expect(result).NotTo(BeNil(), stderr)
			g.Expect(result.ResolvedCommit).To(Equal(commit))
			g.Expect(result.ContentDigest).To(Equal(digestOf(modelFiles())))
			g.Expect(stderr).NotTo(ContainSubstring(refusedLookup), "no name was looked up")
			g.Expect(p.received()).To(ContainElements(
				"GET http://"+unresolvedHost+"/api/models/"+testModel+"/revision/main?blobs=true",
				"GET http://"+unresolvedHost+"/"+testModel+"/resolve/"+commit+"/config.json",
			))
		})
	}
}

func TestRunTrustsTheCABundleTheEnvironmentNames(t *testing.T) {
	cases := []struct {
		name    string
		bundle  bool
		proxied bool
		message string
	}{
		{"SSL_CERT_FILE holds the hub's CA", true, false, ""},
		{"SSL_CERT_FILE holds the hub's CA, through HTTPS_PROXY", true, true, ""},
		{"no CA bundle", false, false, "certificate signed by unknown authority"},
		{"no CA bundle, through HTTPS_PROXY", false, true, "certificate signed by unknown authority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.NewTLS(t, unresolvedHost)
			commit := hub.AddCommit(testModel, "main", modelFiles()...)
			env := map[string]string{populate.EnvEndpoint: hub.URL}
			var p *proxy
			if tc.proxied {
				var proxyURL string
				p, proxyURL = newProxy(t, hub)
				env[populate.EnvEndpoint], env["HTTPS_PROXY"] = "https://"+unresolvedHost, proxyURL
			}
			if tc.bundle {
				bundle := filepath.Join(t.TempDir(), "ca.crt")
				g.Expect(os.WriteFile(bundle, hub.CA, 0o644)).To(Succeed())
				env["SSL_CERT_FILE"] = bundle
			}

			result, stderr := runChild(t, env)

			g.Expect(stderr).NotTo(ContainSubstring(refusedLookup), "no name was looked up")
			if tc.proxied {
				g.Expect(p.received()).To(ContainElement("CONNECT " + unresolvedHost + ":443"))
			}
			if tc.message != "" {
				g.Expect(result).To(BeNil())
				g.Expect(stderr).To(ContainSubstring(tc.message))
				return
			}
			g.Expect(result).NotTo(BeNil(), stderr)
			g.Expect(result.ResolvedCommit).To(Equal(commit))
			g.Expect(result.ContentDigest).To(Equal(digestOf(modelFiles())))
		})
	}
}
