package audit

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseCredentialScope(t *testing.T) {
	cases := []struct {
		raw  string
		want CredentialScope
		err  string
	}{
		{raw: "git.example.com", want: CredentialScope{Host: "git.example.com"}},
		{raw: "Git.Example.COM/org/", want: CredentialScope{Host: "git.example.com", Path: "/org"}},
		{raw: "https://git.example.com:8443/org/fleet.git", want: CredentialScope{Scheme: "https", Host: "git.example.com", Port: 8443, Path: "/org/fleet"}},
		{raw: "ssh://127.0.0.1:2222", want: CredentialScope{Scheme: "ssh", Host: "127.0.0.1", Port: 2222}},
		{raw: "[::1]:8080/x", want: CredentialScope{Host: "::1", Port: 8080, Path: "/x"}},
		{raw: "git.example.com/org/../other", want: CredentialScope{Host: "git.example.com", Path: "/other"}},
		{raw: "ftp://git.example.com", err: `scheme "ftp"`},
		{raw: "https://me:pw@git.example.com", err: "names a user"},
		{raw: "git@git.example.com", err: "names a user"},
		{raw: "*.example.com", err: "no query, fragment or wildcard"},
		{raw: "git.example.com/x?y", err: "no query, fragment or wildcard"},
		{raw: "https:///org", err: "names no host"},
		{raw: "git.example.com:0", err: `port "0"`},
		{raw: "git.example.com:http", err: "credentials scope"},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseCredentialScope(tc.raw)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.want.raw = tc.raw
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestCredentialScopeMatchesProtocolHostPortAndPathPrefix(t *testing.T) {
	cases := []struct {
		scope string
		match []string
		not   []string
	}{
		{
			scope: "git.example.com",
			match: []string{"https://git.example.com/x.git", "ssh://git@git.example.com/x", "git@git.example.com:org/x.git", "http://git.example.com/x", "https://GIT.example.com/x"},
			not: []string{"https://git.example.com:8443/x", "ssh://git@git.example.com:2222/x", "https://git.example.com.attacker.test/x",
				"https://attacker.test/git.example.com/x", "https://token@git.example.com/x", "file:///git.example.com/x", "/srv/git.example.com", "oci://git.example.com/x"},
		},
		{
			scope: "https://git.example.com/org",
			match: []string{"https://git.example.com/org", "https://git.example.com/org/x.git", "https://git.example.com:443/org/team/x"},
			not:   []string{"https://git.example.com/organisation/x", "https://git.example.com/x", "http://git.example.com/org/x", "ssh://git@git.example.com/org/x", "https://git.example.com/org/../x"},
		},
		{
			scope: "127.0.0.1:8080",
			match: []string{"http://127.0.0.1:8080/x", "https://127.0.0.1:8080/x"},
			not:   []string{"http://127.0.0.1:8081/x", "http://127.0.0.2:8080/x", "http://localhost:8080/x", "http://127.0.0.1/x"},
		},
		{scope: "ssh://git.example.com/org/fleet.git", match: []string{"git@git.example.com:org/fleet.git", "ssh://git@git.example.com/org/fleet"}, not: []string{"git@git.example.com:org/fleet2.git"}},
	}
	for _, tc := range cases {
		t.Run(tc.scope, func(t *testing.T) {
			g := NewWithT(t)
			scope, err := ParseCredentialScope(tc.scope)
			g.Expect(err).NotTo(HaveOccurred())
			for _, url := range tc.match {
				g.Expect(scope.Matches(url)).To(BeTrue(), url)
			}
			for _, url := range tc.not {
				g.Expect(scope.Matches(url)).To(BeFalse(), url)
			}
		})
	}
}

func TestGivenCredentialsGoOnlyWhereTheyAreFor(t *testing.T) {
	scopes, err := ParseCredentialScopes("git.example.com/org, ,ssh://git.example.com")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	token := Credentials{Username: "git", Password: "t0ken", From: "$GIT_TOKEN", KnownHosts: []byte("hosts"), KnownHostsFrom: "--known-hosts f"}
	trust := Credentials{KnownHosts: []byte("hosts"), KnownHostsFrom: "--known-hosts f"}
	cases := []struct {
		name     string
		overHTTP bool
		url      string
		want     Credentials
		err      string
	}{
		{name: "a repository a scope names", url: "https://git.example.com/org/x.git", want: token},
		{name: "another host gets the known hosts only", url: "https://attacker.test/org/x.git", want: trust},
		{name: "another path of the host", url: "https://git.example.com/other/x.git", want: trust},
		{name: "plain http is refused", url: "http://git.example.com/org/x.git", err: "$GIT_TOKEN for http://git.example.com/org/x.git: credentials are not sent over plain http: use https, or allow it with --allow-insecure-credentials"},
		{name: "plain http when allowed", overHTTP: true, url: "http://git.example.com/org/x.git", want: token},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			given := &GivenCredentials{Credentials: token, For: scopes, OverHTTP: tc.overHTTP}
			got, err := given.ForURL(tc.url)
			if tc.err != "" {
				g.Expect(err).To(MatchError(tc.err))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestUnmatchedScopesAreTheOnesNoRepositoryUsed(t *testing.T) {
	g := NewWithT(t)
	scopes, err := ParseCredentialScopes("git.example.com,other.example.com")
	g.Expect(err).NotTo(HaveOccurred())
	given := &GivenCredentials{Credentials: Credentials{BearerToken: "b", From: "$GIT_BEARER_TOKEN"}, For: scopes}
	_, err = given.ForURL("https://git.example.com/x")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = given.ForURL("https://third.example.com/x")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(given.Unmatched()).To(Equal(scopes[1:]))

	noSecrets := &GivenCredentials{Credentials: Credentials{KnownHosts: []byte("h")}, For: scopes}
	g.Expect(noSecrets.Unmatched()).To(BeEmpty(), "scopes without credentials have nothing to send")
}

func TestRefusedRepositories(t *testing.T) {
	cases := []struct {
		url         string
		fromCluster bool
		err         string
	}{
		{url: "https://git.example.com/x.git", fromCluster: true},
		{url: "git@git.example.com:x.git", fromCluster: true},
		{url: "ssh://git@git.example.com/x", fromCluster: true},
		{url: "https://ghp_t0ken@git.example.com/x.git", err: "the repository URL https://git.example.com/x.git carries credentials (user info): refused"},
		{url: "http://me:pw@git.example.com/x.git", err: "the repository URL http://git.example.com/x.git carries credentials"},
		{url: "ssh://git:pw@git.example.com/x", err: "the repository URL ssh://git.example.com/x carries credentials"},
		{url: "file:///srv/x.git", fromCluster: true, err: "the repository file:///srv/x.git is a local path, named by a binding read from the cluster: refused"},
		{url: "/srv/x.git", fromCluster: true, err: "is a local path"},
		{url: "../x.git", fromCluster: true, err: "is a local path"},
		{url: "file:///srv/x.git"},
		{url: "/srv/x.git"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			err := refusedRepository(tc.url, tc.fromCluster)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			g.Expect(err.Error()).NotTo(ContainSubstring("t0ken"))
			g.Expect(err.Error()).NotTo(ContainSubstring(":pw"))
		})
	}
}

// FuzzCredentialScope checks what any scope and URL must keep to: matching
// never panics, a match is on the scope's host and port and under its
// path, and a URL with user info over HTTP(S) never matches.
func FuzzCredentialScope(f *testing.F) {
	for _, seed := range [][2]string{
		{"git.example.com", "https://git.example.com/x.git"},
		{"https://git.example.com:8443/org", "https://git.example.com:8443/org/x"},
		{"ssh://git.example.com/org", "git@git.example.com:org/x.git"},
		{"127.0.0.1:80/a", "http://127.0.0.1/a/../b"},
		{"[::1]", "https://[::1]/x"},
		{"git.example.com", "https://u:p@git.example.com/x"},
		{"git.example.com/org", "https://git.example.com/org%2f..%2fx"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, rawScope, url string) {
		scope, err := ParseCredentialScope(rawScope)
		if err != nil {
			return
		}
		if !scope.Matches(url) {
			return
		}
		target, ok := parseTarget(url)
		if !ok {
			t.Fatalf("%q matches %q, which is no network URL", rawScope, url)
		}
		if target.host != scope.Host || target.port != portOrDefault(scope.Port, target.scheme) {
			t.Fatalf("%q matches %q on another host or port", rawScope, url)
		}
		if scope.Path != "" && target.path != scope.Path && !strings.HasPrefix(target.path, scope.Path+"/") {
			t.Fatalf("%q matches %q outside its path", rawScope, url)
		}
		if strings.Contains(target.path, "/../") || strings.HasSuffix(target.path, "/..") {
			t.Fatalf("%q matches %q through a path that climbs", rawScope, url)
		}
	})
}

// A repository URL with a token as its user is printed without it.
func TestPrintableRepositoryDropsUserInfo(t *testing.T) {
	cases := map[string]string{
		"https://ghp_secret@git.example.com/org/repo.git": "https://git.example.com/org/repo.git",
		"https://user:pass@git.example.com/org/repo.git":  "https://git.example.com/org/repo.git",
		"https://git.example.com/org/repo.git":            "https://git.example.com/org/repo.git",
		"git@git.example.com:org/repo.git":                "git@git.example.com:org/repo.git",
		"ssh://git@git.example.com/org/repo.git":          "ssh://git@git.example.com/org/repo.git",
		"ssh://git:pw@git.example.com/org/repo.git":       "ssh://git.example.com/org/repo.git",
	}
	for in, want := range cases {
		if got := printableRepository(in); got != want {
			t.Errorf("printableRepository(%q) = %q, want %q", in, got, want)
		}
	}
}
