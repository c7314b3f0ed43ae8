package cli

import (
	"net"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
)

// closedPort is a loopback host:port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := listener.Addr().String()
	if err := listener.Close(); err != nil {
		t.Fatal(err)
	}
	return address
}

// TestAuditSaysOnceWhereGivenCredentialsWentNowhere: a token without a
// scope, or with one no cloned repository matches, is named once on
// stderr; one that matched is not.
func TestAuditSaysOnceWhereGivenCredentialsWentNowhere(t *testing.T) {
	address := closedPort(t)
	_, commit := commitServer(t)
	file := recordedBinding(t, commit, func(b *embedopsv1.ModelCacheBinding) {
		b.Spec.Source.Repository = "https://" + address + "/fleet.git"
	})
	cases := []struct {
		name    string
		flags   []string
		warning string
	}{
		{name: "no scope", warning: "warning: $GIT_TOKEN not sent to any repository: name their hosts with --credentials-for or $GIT_CREDENTIALS_FOR\n"},
		{name: "a scope elsewhere", flags: []string{"--credentials-for", "git.example.com"},
			warning: "warning: $GIT_TOKEN for git.example.com not sent: no repository the audit cloned is there\n"},
		{name: "a scope that matched", flags: []string{"--credentials-for", address}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv(audit.EnvToken, "t0ken-secret")
			t.Setenv(audit.EnvCredentialsFor, "")
			args := append([]string{"audit", "-f", file, "--cache-dir", t.TempDir(), "--allow-declared-host", "127.0.0.1"}, tc.flags...)
			out, stderr, err := runCLI("", args...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("Unverifiable"), "nothing listens there")
			g.Expect(out + stderr).NotTo(ContainSubstring("t0ken-secret"))
			if tc.warning == "" {
				g.Expect(stderr).NotTo(ContainSubstring("$GIT_TOKEN"))
				return
			}
			g.Expect(strings.Count(stderr, "$GIT_TOKEN")).To(Equal(1), stderr)
			g.Expect(stderr).To(ContainSubstring(tc.warning))
		})
	}
}

func TestAuditRefusesBadCredentialFlags(t *testing.T) {
	g := NewWithT(t)
	_, _, err := runCLI("", "audit", "-f", "x.yaml", "--ssh-key", "/dev/zero")
	g.Expect(err).To(MatchError("reading --ssh-key: /dev/zero is over 1048576 bytes: refused"))
	_, _, err = runCLI("", "audit", "-f", "x.yaml", "--credentials-for", "https://me:pw@git.example.com")
	g.Expect(IsUsageError(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("names a user")))
}

func TestDiffSendsGivenCredentialsToItsRepoOnly(t *testing.T) {
	token := audit.Credentials{Username: "git", Password: "t0ken", From: "$GIT_TOKEN"}
	cases := []struct {
		repo     string
		overHTTP bool
		password string
		err      string
	}{
		{repo: "https://git.example.com/fleet.git", password: "t0ken"},
		{repo: "http://git.example.com/fleet.git", err: "$GIT_TOKEN for http://git.example.com/fleet.git: credentials are not sent over plain http"},
		{repo: "http://git.example.com/fleet.git", overHTTP: true, password: "t0ken"},
		{repo: "git://git.example.com/fleet.git"},
	}
	for _, tc := range cases {
		t.Run(tc.repo, func(t *testing.T) {
			g := NewWithT(t)
			scopes, err := audit.ParseCredentialScopes("elsewhere.example.com")
			g.Expect(err).NotTo(HaveOccurred())
			given := &audit.GivenCredentials{Credentials: token, For: scopes, OverHTTP: tc.overHTTP}
			got, err := diffCredentials(given, tc.repo)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Password).To(Equal(tc.password))
		})
	}
}
