package audit

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCredentialsFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Credentials
	}{
		{name: "nothing", env: map[string]string{}, want: Credentials{}},
		{name: "token", env: map[string]string{EnvToken: "t"}, want: Credentials{Username: "git", Password: "t", From: "$GIT_TOKEN"}},
		{name: "token and user", env: map[string]string{EnvToken: "t", EnvUsername: "me"}, want: Credentials{Username: "me", Password: "t", From: "$GIT_TOKEN"}},
		{name: "user and password", env: map[string]string{EnvUsername: "me", EnvPassword: "pw"}, want: Credentials{Username: "me", Password: "pw", From: "$GIT_USERNAME/$GIT_PASSWORD"}},
		{name: "bearer wins", env: map[string]string{EnvBearerToken: "b", EnvToken: "t"}, want: Credentials{BearerToken: "b", From: "$GIT_BEARER_TOKEN"}},
		{name: "key password", env: map[string]string{EnvSSHKeyPassword: "k"}, want: Credentials{SSHKeyPassword: "k"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(CredentialsFromEnv(func(k string) string { return tc.env[k] })).To(Equal(tc.want))
		})
	}
}

func TestAuthMethodByTransport(t *testing.T) {
	basic := Credentials{Username: "u", Password: "p"}
	cases := []struct {
		name  string
		creds Credentials
		url   string
		want  transport.AuthMethod
	}{
		{name: "basic over https", creds: basic, url: "https://git.example.com/x.git", want: &http.BasicAuth{Username: "u", Password: "p"}},
		{name: "basic over http", creds: basic, url: "http://git.example.com/x.git", want: &http.BasicAuth{Username: "u", Password: "p"}},
		{name: "bearer wins", creds: Credentials{Username: "u", Password: "p", BearerToken: "b"}, url: "https://git.example.com/x.git", want: &http.TokenAuth{Token: "b"}},
		{name: "basic is not sent over ssh", creds: basic, url: "ssh://git@git.example.com/x"},
		{name: "nor scp-like ssh", creds: basic, url: "git@git.example.com:x.git"},
		{name: "nor files", creds: basic, url: "file:///srv/x.git"},
		{name: "anonymous", url: "https://git.example.com/x.git"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := tc.creds.AuthMethod(tc.url)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.want == nil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestAnUnreadableSSHKeyNamesItsSourceNotItsValue(t *testing.T) {
	g := NewWithT(t)
	creds := Credentials{SSHKey: []byte("not-a-key-secret-bytes"), From: "Secret flux-system/git", KnownHosts: []byte("example.com ssh-ed25519 AAAA\n"), KnownHostsFrom: "Secret flux-system/git"}
	_, err := creds.AuthMethod("ssh://git@git.example.com/x")
	g.Expect(err).To(MatchError(ContainSubstring("reading the SSH key from Secret flux-system/git")))
	g.Expect(err.Error()).NotTo(ContainSubstring("not-a-key-secret-bytes"))
}

func TestUnreadableKnownHostsAreAnErrorNotASkippedCheck(t *testing.T) {
	g := NewWithT(t)
	creds := Credentials{KnownHosts: []byte("example.com ssh-ed25519 AAAA\n"), KnownHostsFrom: "ConfigMap argocd/argocd-ssh-known-hosts-cm"}
	_, err := creds.AuthMethod("ssh://git@git.example.com/x")
	g.Expect(err).To(MatchError(HavePrefix("reading known hosts from ConfigMap argocd/argocd-ssh-known-hosts-cm: knownhosts: known_hosts:1:")))
}

func TestOverriddenByReplacesEachKindWhole(t *testing.T) {
	withTLS := func(c Credentials, ca []byte, caFrom string, cert, key []byte, certFrom string) Credentials {
		c.CABundle, c.CABundleFrom, c.ClientCert, c.ClientKey, c.ClientCertFrom = ca, caFrom, cert, key, certFrom
		return c
	}
	cluster := Credentials{Username: "u", Password: "p", SSHKey: []byte("k"), SSHKeyPassword: "kp", KnownHosts: []byte("h"), From: "Secret a/b", KnownHostsFrom: "Secret a/b"}
	cluster = withTLS(cluster, []byte("ca"), "Secret a/b", []byte("cert"), []byte("key"), "Secret a/b")
	cases := []struct {
		name  string
		flags Credentials
		want  Credentials
	}{
		{name: "nothing given", flags: Credentials{}, want: cluster},
		{
			name:  "a token replaces user and password",
			flags: Credentials{BearerToken: "t", From: "$GIT_BEARER_TOKEN"},
			want: withTLS(Credentials{BearerToken: "t", SSHKey: []byte("k"), SSHKeyPassword: "kp", KnownHosts: []byte("h"), From: "Secret a/b and $GIT_BEARER_TOKEN", KnownHostsFrom: "Secret a/b"},
				[]byte("ca"), "Secret a/b", []byte("cert"), []byte("key"), "Secret a/b"),
		},
		{
			name:  "a key replaces the key and its password",
			flags: Credentials{SSHKey: []byte("mine"), From: "--ssh-key id"},
			want: withTLS(Credentials{Username: "u", Password: "p", SSHKey: []byte("mine"), KnownHosts: []byte("h"), From: "Secret a/b and --ssh-key id", KnownHostsFrom: "Secret a/b"},
				[]byte("ca"), "Secret a/b", []byte("cert"), []byte("key"), "Secret a/b"),
		},
		{
			name:  "a CA bundle replaces the CA bundle only",
			flags: Credentials{CABundle: []byte("my-ca"), CABundleFrom: "flags"},
			want:  withTLS(cluster, []byte("my-ca"), "flags", []byte("cert"), []byte("key"), "Secret a/b"),
		},
		{
			name:  "a client certificate replaces the certificate and its key",
			flags: Credentials{ClientCert: []byte("my-cert"), ClientCertFrom: "flags"},
			want:  withTLS(cluster, []byte("ca"), "Secret a/b", []byte("my-cert"), nil, "flags"),
		},
		{
			name:  "HTTP, key and known hosts replaced",
			flags: Credentials{Username: "me", SSHKey: []byte("mine"), KnownHosts: []byte("mh"), From: "flags", KnownHostsFrom: "--known-hosts f"},
			want: withTLS(Credentials{Username: "me", SSHKey: []byte("mine"), KnownHosts: []byte("mh"), From: "flags", KnownHostsFrom: "--known-hosts f"},
				[]byte("ca"), "Secret a/b", []byte("cert"), []byte("key"), "Secret a/b"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(cluster.OverriddenBy(tc.flags)).To(Equal(tc.want))
		})
	}
}

func TestArgoCredentialsMatchTheRepositoryThenTheLongestTemplate(t *testing.T) {
	secret := func(name, kind, url string) corev1.Secret {
		return corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: name, Labels: map[string]string{ArgoSecretTypeLabel: kind}},
			Data:       map[string][]byte{"url": []byte(url), "password": []byte(name)},
		}
	}
	secrets := []corev1.Secret{
		secret("org", ArgoRepoCreds, "https://git.example.com/org"),
		secret("team", ArgoRepoCreds, "https://git.example.com/org/team"),
		secret("fleet", ArgoRepository, "https://git.example.com/org/team/fleet.git"),
		secret("other-org", ArgoRepoCreds, "https://git.example.com/other"),
		secret("ssh", ArgoRepository, "git@git.example.com:org/ssh.git"),
	}
	knownHosts := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: ArgoKnownHostsConfigMap}, Data: map[string]string{ArgoKnownHostsKey: "h"}}
	cases := []struct{ url, want string }{
		{url: "https://git.example.com/org/team/fleet", want: "fleet"},
		{url: "https://GIT.example.com/org/team/fleet.git/", want: "fleet"},
		{url: "https://git.example.com/org/team/models.git", want: "team"},
		{url: "https://git.example.com/org/apps.git", want: "org"},
		{url: "ssh://git@git.example.com/org/ssh.git", want: "ssh"},
		{url: "https://elsewhere.example.com/org/apps.git"},
		{url: "https://git.example.com/organisation/apps.git"},
		{url: "https://git.example.com.attacker.test/org/apps.git"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			got, ok, err := ArgoCredentials(secrets, knownHosts, nil, tc.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(Equal(tc.want != ""))
			g.Expect(got.KnownHostsFrom).To(Equal("ConfigMap argocd/argocd-ssh-known-hosts-cm"), "known hosts apply with or without a Secret")
			if tc.want == "" {
				return
			}
			g.Expect(got.Password).To(Equal(tc.want))
			g.Expect(got.From).To(Equal("Secret argocd/" + tc.want))
		})
	}
}
