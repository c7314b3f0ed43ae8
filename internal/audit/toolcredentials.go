package audit

import (
	neturl "net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Secret and ConfigMap keys as the GitOps tools read them.
const (
	// ArgoSecretTypeLabel marks Argo CD's repository Secrets; its value is
	// ArgoRepository or ArgoRepoCreds.
	ArgoSecretTypeLabel = "argocd.argoproj.io/secret-type"
	// ArgoRepository is the label value of a Secret for one repository,
	// matched by its url.
	ArgoRepository = "repository"
	// ArgoRepoCreds is the label value of a credential template, used for
	// every repository whose URL its url is a prefix of.
	ArgoRepoCreds = "repo-creds"
	// ArgoKnownHostsConfigMap holds Argo CD's SSH known hosts, in its
	// namespace, under ArgoKnownHostsKey.
	ArgoKnownHostsConfigMap = "argocd-ssh-known-hosts-cm"
	// ArgoKnownHostsKey is the known_hosts key of ArgoKnownHostsConfigMap.
	ArgoKnownHostsKey = "ssh_known_hosts"
	// ArgoTLSCertsConfigMap holds Argo CD's TLS certificates for HTTPS
	// repositories, in its namespace: one PEM bundle per server, keyed by
	// its host name without the port.
	ArgoTLSCertsConfigMap = "argocd-tls-certs-cm"
)

// FluxCredentials reads a GitRepository's spec.secretRef Secret with the
// keys source-controller reads (fluxcd/pkg/git options.go,
// NewAuthOptions): username and password, bearerToken, identity (with
// password for an encrypted key) and known_hosts; for HTTPS, the CA
// certificates ca.crt (else the older caFile) and the client certificate
// tls.crt with its key tls.key.
func FluxCredentials(secret *corev1.Secret) Credentials {
	data := secret.Data
	c := Credentials{
		BearerToken: string(data["bearerToken"]),
		From:        objectName("Secret", secret.Namespace, secret.Name),
	}
	if identity := data["identity"]; len(identity) > 0 {
		// With an identity, password decrypts it (fluxcd/pkg/git
		// AuthOptions: the SSH transport reads username, password, identity).
		c.SSHKey, c.SSHKeyPassword = identity, string(data["password"])
	} else {
		c.Username, c.Password = string(data["username"]), string(data["password"])
	}
	if hosts := data["known_hosts"]; len(hosts) > 0 {
		c.KnownHosts, c.KnownHostsFrom = hosts, c.From
	}
	c.withTLS(firstOf(data, "ca.crt", "caFile"), data["tls.crt"], data["tls.key"], c.From)
	return c
}

// FluxCertCredentials reads an OCIRepository's spec.certSecretRef Secret
// as source-controller does (fluxcd/pkg/runtime/secrets: ca.crt, tls.crt
// and tls.key, else the older caFile, certFile and keyFile). The Secret is
// the registry's, while the audit clones the git repository the artifact
// was built from: its CA certificates are trusted for that repository too,
// but its client certificate is presented only when the repository is on
// the registry's host.
func FluxCertCredentials(secret *corev1.Secret, registryURL, repository string) Credentials {
	data := secret.Data
	cert, key := firstOf(data, "tls.crt", "certFile"), firstOf(data, "tls.key", "keyFile")
	if !sameHost(registryURL, repository) {
		cert, key = nil, nil
	}
	var c Credentials
	c.withTLS(firstOf(data, "ca.crt", "caFile"), cert, key, objectName("Secret", secret.Namespace, secret.Name))
	return c
}

// ArgoCredentials picks the credentials Argo CD's repo-server uses for
// url (argo-cd util/db: GetRepository, enrichCredsToRepo,
// getRepositoryCredentialIndex): the repository Secret whose url is url,
// unless it holds no credentials, else the repo-creds Secret whose url is
// the longest prefix of url; keys username, password, bearerToken,
// sshPrivateKey, tlsClientCertData and tlsClientCertKey. knownHosts
// (ArgoKnownHostsConfigMap) gives the SSH host keys and tlsCerts
// (ArgoTLSCertsConfigMap) the certificates trusted for url's host, whether
// or not a Secret matches; either may be nil. ok is false when no Secret
// matches.
func ArgoCredentials(secrets []corev1.Secret, knownHosts, tlsCerts *corev1.ConfigMap, url string) (c Credentials, ok bool) {
	repository, template := argoSecrets(secrets, url)
	switch {
	case repository != nil && (argoHasCredentials(repository) || template == nil):
		c, ok = argoSecretCredentials(repository), true
	case template != nil:
		c, ok = argoSecretCredentials(template), true
	}
	if knownHosts != nil {
		if hosts := knownHosts.Data[ArgoKnownHostsKey]; hosts != "" {
			c.KnownHosts, c.KnownHostsFrom = []byte(hosts), objectName("ConfigMap", knownHosts.Namespace, knownHosts.Name)
		}
	}
	if host := httpsHost(url); tlsCerts != nil && host != "" {
		if certs := tlsCerts.Data[host]; certs != "" {
			c.CABundle, c.CABundleFrom = []byte(certs), objectName("ConfigMap", tlsCerts.Namespace, tlsCerts.Name)+" key "+host
		}
	}
	return c, ok
}

// argoSecrets finds the repository Secret whose url is url and the
// repo-creds Secret whose url is the longest prefix of it; nil when none.
func argoSecrets(secrets []corev1.Secret, url string) (repository, template *corev1.Secret) {
	want := normalizeGitURL(url)
	longest := -1
	for i := range secrets {
		secretURL := normalizeGitURL(string(secrets[i].Data["url"]))
		switch secrets[i].Labels[ArgoSecretTypeLabel] {
		case ArgoRepository:
			if secretURL == want {
				repository = &secrets[i]
			}
		case ArgoRepoCreds:
			if secretURL != "" && strings.HasPrefix(want, secretURL) && len(secretURL) > longest {
				template, longest = &secrets[i], len(secretURL)
			}
		}
	}
	return repository, template
}

// argoHasCredentials is argo-cd's Repository.HasCredentials, with the
// bearer token: a repository Secret without them takes its template's.
func argoHasCredentials(secret *corev1.Secret) bool {
	for _, key := range []string{"username", "password", "bearerToken", "sshPrivateKey", "tlsClientCertData"} {
		if len(secret.Data[key]) > 0 {
			return true
		}
	}
	return false
}

// argoSecretCredentials reads one repository or repo-creds Secret.
func argoSecretCredentials(secret *corev1.Secret) Credentials {
	c := Credentials{
		Username:    string(secret.Data["username"]),
		Password:    string(secret.Data["password"]),
		BearerToken: string(secret.Data["bearerToken"]),
		SSHKey:      secret.Data["sshPrivateKey"],
		From:        objectName("Secret", secret.Namespace, secret.Name),
	}
	c.withTLS(nil, secret.Data["tlsClientCertData"], secret.Data["tlsClientCertKey"], c.From)
	return c
}

// withTLS sets the CA certificates and the client certificate that one
// object holds, when it holds them.
func (c *Credentials) withTLS(ca, cert, key []byte, from string) {
	if len(ca) > 0 {
		c.CABundle, c.CABundleFrom = ca, from
	}
	if len(cert) > 0 || len(key) > 0 {
		c.ClientCert, c.ClientKey, c.ClientCertFrom = cert, key, from
	}
}

// firstOf is the first of keys that data holds.
func firstOf(data map[string][]byte, keys ...string) []byte {
	for _, key := range keys {
		if len(data[key]) > 0 {
			return data[key]
		}
	}
	return nil
}

// objectName names an object for messages: "Secret argocd/repo-1".
func objectName(kind, namespace, name string) string {
	return kind + " " + namespace + "/" + name
}

// httpsHost is the host name, without the port, of an HTTPS URL; "" for
// any other URL.
func httpsHost(url string) string {
	parsed, err := neturl.Parse(url)
	if err != nil || !strings.EqualFold(parsed.Scheme, "https") {
		return ""
	}
	return parsed.Hostname()
}

// sameHost reports whether two URLs name the same host, whatever their
// schemes and ports.
func sameHost(a, b string) bool {
	parsedA, errA := neturl.Parse(a)
	parsedB, errB := neturl.Parse(b)
	return errA == nil && errB == nil && parsedA.Hostname() != "" && strings.EqualFold(parsedA.Hostname(), parsedB.Hostname())
}

// normalizeGitURL is a simplified argo-cd util/git NormalizeGitURL
// (lower case, no ".git" or trailing slash; scp-like SSH as ssh://),
// written here because the argo-cd module is far too large a dependency
// for one function.
func normalizeGitURL(url string) string {
	url = strings.ToLower(strings.TrimSpace(url))
	if !strings.Contains(url, "://") {
		if userHost, path, ok := strings.Cut(url, ":"); ok && strings.Contains(userHost, "@") {
			url = "ssh://" + userHost + "/" + strings.TrimPrefix(path, "/")
		}
	}
	url = strings.TrimSuffix(strings.TrimSuffix(url, "/"), ".git")
	return strings.TrimSuffix(url, "/")
}
