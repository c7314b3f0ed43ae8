package audit

import (
	"cmp"
	"fmt"
	neturl "net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
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

// maxObjectBytes caps the data of a Secret or ConfigMap credentials are
// read from: Kubernetes' MaxSecretSize, 1 MiB (kubernetes
// pkg/apis/core/types.go), which the API server enforces for Secrets; an
// object from anywhere else is held to it too.
const maxObjectBytes = 1 << 20

// FluxCredentials reads a GitRepository's spec.secretRef Secret for its
// url with the keys source-controller reads, chosen by the URL's scheme as
// NewAuthOptions chooses them (fluxcd/pkg git/options.go): over SSH,
// identity (with password to decrypt it) and known_hosts; over HTTP(S),
// bearerToken when the key exists, else username and password, and the CA
// certificates ca.crt (else the older caFile) with the client certificate
// tls.crt and its key tls.key. A Secret shared by an SSH and an HTTPS
// GitRepository so gives each its own keys. A password without a user
// name over HTTP(S) is refused, as AuthOptions.Validate refuses it; an
// oversized Secret is refused.
func FluxCredentials(secret *corev1.Secret, url string) (Credentials, error) {
	data := secret.Data
	c := Credentials{From: objectName("Secret", secret.Namespace, secret.Name)}
	if err := checkSize(c.From, dataSize(data)); err != nil {
		return Credentials{}, err
	}
	endpoint, err := transport.NewEndpoint(url)
	if err != nil {
		return Credentials{}, fmt.Errorf("parsing repository URL: %w", err)
	}
	switch endpoint.Protocol {
	case "ssh":
		c.SSHKey, c.SSHKeyPassword = data["identity"], string(data["password"])
		if hosts := data["known_hosts"]; len(hosts) > 0 {
			c.KnownHosts, c.KnownHostsFrom = hosts, c.From
		}
	case "http", "https":
		if token, found := data["bearerToken"]; found {
			c.BearerToken = string(token)
		} else {
			c.Username, c.Password = string(data["username"]), string(data["password"])
		}
		if c.Username == "" && c.Password != "" {
			return Credentials{}, fmt.Errorf("%s has a password and no username, which source-controller refuses", c.From)
		}
		c.withTLS(firstOf(data, "ca.crt", "caFile"), data["tls.crt"], data["tls.key"], c.From)
	}
	return c, nil
}

// checkSize refuses an object whose data is over maxObjectBytes.
func checkSize(from string, size int) error {
	if size > maxObjectBytes {
		return fmt.Errorf("%s holds %d bytes, more than the %d a Secret may: refused", from, size, maxObjectBytes)
	}
	return nil
}

// dataSize is the size of an object's data, keys and values.
func dataSize[V string | []byte](data map[string]V) int {
	size := 0
	for key, value := range data {
		size += len(key) + len(value)
	}
	return size
}

// FluxCertCredentials reads an OCIRepository's spec.certSecretRef Secret
// as source-controller does (fluxcd/pkg/runtime/secrets: ca.crt, tls.crt
// and tls.key, else the older caFile, certFile and keyFile). The Secret is
// the registry's, while the audit clones the git repository the artifact
// was built from: its CA certificates are trusted for that repository too,
// but its client certificate is presented only when the repository is an
// HTTPS URL on the registry's host and port (oci:// and https:// default to
// 443), the one server it was issued for.
func FluxCertCredentials(secret *corev1.Secret, registryURL, repository string) (Credentials, error) {
	data := secret.Data
	from := objectName("Secret", secret.Namespace, secret.Name)
	if err := checkSize(from, dataSize(data)); err != nil {
		return Credentials{}, err
	}
	cert, key := firstOf(data, "tls.crt", "certFile"), firstOf(data, "tls.key", "keyFile")
	if !sameServer(registryURL, repository) {
		cert, key = nil, nil
	}
	var c Credentials
	c.withTLS(firstOf(data, "ca.crt", "caFile"), cert, key, from)
	return c, nil
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
// matches. A Secret or ConfigMap it reads over 1 MiB is an error.
func ArgoCredentials(secrets []corev1.Secret, knownHosts, tlsCerts *corev1.ConfigMap, url string) (c Credentials, ok bool, err error) {
	repository, template := argoSecrets(secrets, url)
	var chosen *corev1.Secret
	switch {
	case repository != nil && (argoHasCredentials(repository) || template == nil):
		chosen = repository
	case template != nil:
		chosen = template
	}
	if err := argoSizes(chosen, knownHosts, tlsCerts); err != nil {
		return Credentials{}, false, err
	}
	if chosen != nil {
		c, ok = argoSecretCredentials(chosen), true
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
	return c, ok, nil
}

// argoSizes refuses an oversized Secret or ConfigMap among those read;
// any may be nil.
func argoSizes(secret *corev1.Secret, configMaps ...*corev1.ConfigMap) error {
	if secret != nil {
		if err := checkSize(objectName("Secret", secret.Namespace, secret.Name), dataSize(secret.Data)); err != nil {
			return err
		}
	}
	for _, cm := range configMaps {
		if cm == nil {
			continue
		}
		if err := checkSize(objectName("ConfigMap", cm.Namespace, cm.Name), dataSize(cm.Data)+dataSize(cm.BinaryData)); err != nil {
			return err
		}
	}
	return nil
}

// argoSecrets finds the repository Secret whose url is url and the
// repo-creds Secret whose url is the longest prefix of it; nil when none.
// Argo CD compares plain string prefixes (util/db repository_secrets.go,
// getRepositoryCredentialIndex); here the prefix must also end where a
// path segment does, so that a template for https://git.example.com never
// reaches https://git.example.com.attacker.test.
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
			if secretURL != "" && segmentPrefix(want, secretURL) && len(secretURL) > longest {
				template, longest = &secrets[i], len(secretURL)
			}
		}
	}
	return repository, template
}

// segmentPrefix reports whether prefix is s or s up to a "/".
func segmentPrefix(s, prefix string) bool {
	return s == prefix || strings.HasPrefix(s, strings.TrimSuffix(prefix, "/")+"/")
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

// sameServer reports whether an OCI registry URL and an HTTPS repository
// URL name the same host and port.
func sameServer(registry, repository string) bool {
	parsedA, errA := neturl.Parse(registry)
	parsedB, errB := neturl.Parse(repository)
	if errA != nil || errB != nil || parsedA.Hostname() == "" || !strings.EqualFold(parsedB.Scheme, "https") || parsedB.User != nil {
		return false
	}
	port := func(u *neturl.URL) string { return cmp.Or(u.Port(), "443") }
	return canonicalHost(parsedA.Hostname()) == canonicalHost(parsedB.Hostname()) && port(parsedA) == port(parsedB)
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
