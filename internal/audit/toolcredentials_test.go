package audit

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// secretWith is a Secret in namespace ns holding data.
func secretWith(ns, name string, labels, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestFluxCredentialsReadTheTLSKeysOfTheGitRepositorySecret(t *testing.T) {
	cases := []struct {
		name string
		data map[string]string
		want Credentials
	}{
		{
			name: "ca.crt, tls.crt and tls.key",
			data: map[string]string{"ca.crt": "ca", "tls.crt": "cert", "tls.key": "key"},
			want: Credentials{CABundle: []byte("ca"), CABundleFrom: "Secret flux-system/git", ClientCert: []byte("cert"), ClientKey: []byte("key"), ClientCertFrom: "Secret flux-system/git"},
		},
		{
			name: "ca.crt wins over caFile",
			data: map[string]string{"ca.crt": "ca", "caFile": "older"},
			want: Credentials{CABundle: []byte("ca"), CABundleFrom: "Secret flux-system/git"},
		},
		{
			name: "caFile alone",
			data: map[string]string{"caFile": "older"},
			want: Credentials{CABundle: []byte("older"), CABundleFrom: "Secret flux-system/git"},
		},
		{
			// fluxcd/pkg/git reads no certFile or keyFile for a GitRepository.
			name: "certFile and keyFile are not a GitRepository's keys",
			data: map[string]string{"certFile": "cert", "keyFile": "key"},
		},
		{
			name: "with basic authentication",
			data: map[string]string{"username": "u", "password": "p", "ca.crt": "ca"},
			want: Credentials{Username: "u", Password: "p", CABundle: []byte("ca"), CABundleFrom: "Secret flux-system/git"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.want.From = "Secret flux-system/git"
			got, err := FluxCredentials(secretWith("flux-system", "git", nil, tc.data), "https://git.example.com/fleet.git")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestFluxCertCredentialsPresentTheClientCertificateOnTheRegistryHostOnly(t *testing.T) {
	g := NewWithT(t)
	secret := secretWith("flux-system", "registry-tls", nil, map[string]string{"ca.crt": "ca", "tls.crt": "cert", "tls.key": "key"})
	from := "Secret flux-system/registry-tls"

	same, err := FluxCertCredentials(secret, "oci://git.example.com/fleet", "https://git.example.com:443/org/fleet.git")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(Equal(Credentials{CABundle: []byte("ca"), CABundleFrom: from, ClientCert: []byte("cert"), ClientKey: []byte("key"), ClientCertFrom: from}))

	other, err := FluxCertCredentials(secret, "oci://registry.example.com/fleet", "https://git.example.com/org/fleet.git")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).To(Equal(Credentials{CABundle: []byte("ca"), CABundleFrom: from}), "the registry's CA is trusted, its client certificate stays with it")
	for _, repository := range []string{"https://git.example.com:8443/org/fleet.git", "http://git.example.com/org/fleet.git", "ssh://git@git.example.com/org/fleet.git"} {
		elsewhere, err := FluxCertCredentials(secret, "oci://git.example.com/fleet", repository)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(elsewhere.ClientCert).To(BeEmpty(), "%s is another server than the registry's", repository)
	}

	legacy, err := FluxCertCredentials(secretWith("flux-system", "old", nil, map[string]string{"caFile": "ca", "certFile": "cert", "keyFile": "key"}),
		"oci://git.example.com/fleet", "https://git.example.com/fleet.git")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(legacy.ClientCert).To(Equal([]byte("cert")), "fluxcd/pkg/runtime/secrets falls back to certFile and keyFile")
	g.Expect(legacy.CABundle).To(Equal([]byte("ca")))
}

func TestArgoCredentialsInheritTheTemplateWhenTheRepositoryHasNone(t *testing.T) {
	repository := map[string]string{ArgoSecretTypeLabel: ArgoRepository}
	template := map[string]string{ArgoSecretTypeLabel: ArgoRepoCreds}
	url := "https://git.example.com/org/fleet.git"
	cases := []struct {
		name       string
		secrets    []*corev1.Secret
		from       string
		password   string
		clientCert string
	}{
		{
			name: "a repository Secret with a url only takes the template's",
			secrets: []*corev1.Secret{
				secretWith("argocd", "fleet", repository, map[string]string{"url": url, "insecure": "false"}),
				secretWith("argocd", "org", template, map[string]string{"url": "https://git.example.com/org", "password": "from-template", "tlsClientCertData": "org-cert", "tlsClientCertKey": "org-key"}),
			},
			from: "Secret argocd/org", password: "from-template", clientCert: "org-cert",
		},
		{
			name: "a repository Secret with a client certificate keeps its own",
			secrets: []*corev1.Secret{
				secretWith("argocd", "fleet", repository, map[string]string{"url": url, "tlsClientCertData": "fleet-cert", "tlsClientCertKey": "fleet-key"}),
				secretWith("argocd", "org", template, map[string]string{"url": "https://git.example.com/org", "password": "from-template"}),
			},
			from: "Secret argocd/fleet", clientCert: "fleet-cert",
		},
		{
			name: "a repository Secret without credentials nor template",
			secrets: []*corev1.Secret{
				secretWith("argocd", "fleet", repository, map[string]string{"url": url}),
			},
			from: "Secret argocd/fleet",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var secrets []corev1.Secret
			for _, s := range tc.secrets {
				secrets = append(secrets, *s)
			}
			got, ok, err := ArgoCredentials(secrets, nil, nil, url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue())
			g.Expect(got.From).To(Equal(tc.from))
			g.Expect(got.Password).To(Equal(tc.password))
			g.Expect(string(got.ClientCert)).To(Equal(tc.clientCert))
			if tc.clientCert != "" {
				g.Expect(got.ClientCertFrom).To(Equal(tc.from))
				g.Expect(got.ClientKey).NotTo(BeEmpty())
			}
		})
	}
}

func TestArgoCredentialsTrustTheTLSCertificatesOfTheHost(t *testing.T) {
	certs := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: ArgoTLSCertsConfigMap},
		Data:       map[string]string{"git.example.com": "git-ca", "127.0.0.1": "loopback-ca"},
	}
	cases := []struct{ url, want string }{
		{url: "https://git.example.com/org/fleet.git", want: "git-ca"},
		{url: "https://git.example.com:8443/org/fleet.git", want: "git-ca"},
		{url: "https://127.0.0.1:39211/fleet.git", want: "loopback-ca"},
		{url: "https://elsewhere.example.com/fleet.git"},
		{url: "http://git.example.com/org/fleet.git"},
		{url: "git@git.example.com:org/fleet.git"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			g := NewWithT(t)
			got, ok, err := ArgoCredentials(nil, nil, certs, tc.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeFalse(), "no Secret")
			g.Expect(string(got.CABundle)).To(Equal(tc.want))
			if tc.want != "" {
				g.Expect(got.CABundleFrom).To(HavePrefix("ConfigMap argocd/argocd-tls-certs-cm key "))
			}
		})
	}
}
