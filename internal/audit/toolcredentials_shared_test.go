package audit

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFluxCredentialsChooseKeysByTheURLsScheme: one Secret with SSH and
// HTTPS keys, shared by an ssh:// and an https:// GitRepository, gives
// each the keys of its transport, as fluxcd/pkg git/options.go
// NewAuthOptions does.
func TestFluxCredentialsChooseKeysByTheURLsScheme(t *testing.T) {
	const from = "Secret flux-system/shared"
	shared := map[string]string{
		"identity": "ssh-key", "known_hosts": "hosts", "username": "u", "password": "p",
		"ca.crt": "ca", "tls.crt": "cert", "tls.key": "key",
	}
	withBearer := map[string]string{"identity": "ssh-key", "known_hosts": "hosts", "username": "u", "password": "p", "bearerToken": "b"}
	https := Credentials{Username: "u", Password: "p", From: from, CABundle: []byte("ca"), CABundleFrom: from,
		ClientCert: []byte("cert"), ClientKey: []byte("key"), ClientCertFrom: from}
	ssh := Credentials{SSHKey: []byte("ssh-key"), SSHKeyPassword: "p", KnownHosts: []byte("hosts"), KnownHostsFrom: from, From: from}
	cases := []struct {
		name string
		data map[string]string
		url  string
		want Credentials
	}{
		{name: "ssh:// takes identity, known_hosts and the key's password", data: shared, url: "ssh://git@git.example.com/fleet.git", want: ssh},
		{name: "scp-like SSH too", data: shared, url: "git@git.example.com:fleet.git", want: ssh},
		{name: "https:// takes username, password and TLS", data: shared, url: "https://git.example.com/fleet.git", want: https},
		{name: "http:// as https://", data: shared, url: "http://git.example.com/fleet.git", want: https},
		{
			name: "a bearerToken key wins over basic authentication", data: withBearer, url: "https://git.example.com/fleet.git",
			want: Credentials{BearerToken: "b", From: from},
		},
		{name: "ssh:// never takes a bearer token", data: withBearer, url: "ssh://git@git.example.com/fleet.git", want: ssh},
		{
			name: "an empty bearerToken key still means bearer, as its presence decides", data: map[string]string{"bearerToken": "", "username": "u", "password": "p"},
			url: "https://git.example.com/fleet.git", want: Credentials{From: from},
		},
		{
			name: "ssh:// without identity has no key, nor basic authentication", data: map[string]string{"username": "u", "password": "p"}, url: "ssh://git@git.example.com/fleet.git",
			want: Credentials{SSHKeyPassword: "p", From: from},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := FluxCredentials(secretWith("flux-system", "shared", nil, tc.data), tc.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestFluxCredentialsRefuseWhatSourceControllerRefuses(t *testing.T) {
	g := NewWithT(t)
	_, err := FluxCredentials(secretWith("flux-system", "git", nil, map[string]string{"password": "p"}), "https://git.example.com/x.git")
	g.Expect(err).To(MatchError("Secret flux-system/git has a password and no username, which source-controller refuses"))
	_, err = FluxCredentials(secretWith("flux-system", "git", nil, map[string]string{"password": "p"}), "ssh://git@git.example.com/x.git")
	g.Expect(err).NotTo(HaveOccurred(), "over SSH the password decrypts the identity")
}

// TestOversizedObjectsAreRefused: no Secret or ConfigMap over the 1 MiB
// Kubernetes allows a Secret is read, whichever reader meets it.
func TestOversizedObjectsAreRefused(t *testing.T) {
	huge := strings.Repeat("x", maxObjectBytes)
	big := secretWith("flux-system", "big", nil, map[string]string{"username": "u", "password": huge})
	// Keys count: "username", "u", "password" and the password make 1 MiB.
	fits := secretWith("flux-system", "fits", nil, map[string]string{"username": "u", "password": huge[:maxObjectBytes-17]})
	argoBig := secretWith("argocd", "big", map[string]string{ArgoSecretTypeLabel: ArgoRepository}, map[string]string{"url": "https://git.example.com/x", "password": huge})
	bigHosts := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: ArgoKnownHostsConfigMap}, Data: map[string]string{ArgoKnownHostsKey: huge}}
	want := "holds 1048593 bytes, more than the 1048576 a Secret may: refused"
	cases := []struct {
		name string
		read func() error
		want string
	}{
		{name: "a Flux GitRepository Secret", read: func() error { _, err := FluxCredentials(big, "https://git.example.com/x"); return err }, want: "Secret flux-system/big " + want},
		{name: "a Flux OCIRepository Secret", read: func() error {
			_, err := FluxCertCredentials(big, "oci://r.example.com/x", "https://git.example.com/x")
			return err
		}, want: "Secret flux-system/big " + want},
		{name: "an Argo CD repository Secret", read: func() error {
			_, _, err := ArgoCredentials([]corev1.Secret{*argoBig}, nil, nil, "https://git.example.com/x")
			return err
		}, want: "Secret argocd/big holds 1048612 bytes"},
		{name: "Argo CD's known hosts", read: func() error {
			_, _, err := ArgoCredentials(nil, bigHosts, nil, "ssh://git@git.example.com/x")
			return err
		},
			want: "ConfigMap argocd/argocd-ssh-known-hosts-cm holds 1048591 bytes"},
		{name: "a Secret of exactly 1 MiB is read", read: func() error { _, err := FluxCredentials(fits, "https://git.example.com/x"); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.read()
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(len(err.Error())).To(BeNumerically("<", 200), "the error names the object, never its data")
		})
	}
}
