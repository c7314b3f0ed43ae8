package audit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
)

// Environment variables CredentialsFromEnv reads.
const (
	// EnvUsername is the user name for HTTP basic authentication.
	EnvUsername = "GIT_USERNAME"
	// EnvPassword is the password for HTTP basic authentication.
	EnvPassword = "GIT_PASSWORD"
	// EnvToken is a token for HTTP authentication; it is used as the
	// password, with EnvUsername or "git" as the user name.
	EnvToken = "GIT_TOKEN"
	// EnvBearerToken is a token sent as an HTTP bearer token.
	EnvBearerToken = "GIT_BEARER_TOKEN"
	// EnvSSHKeyPassword is the password of an encrypted SSH key.
	EnvSSHKeyPassword = "GIT_SSH_KEY_PASSWORD"
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
)

// Credentials authenticate the clone and fetches of one repository. They
// are held in memory only and never printed, logged or written to disk;
// errors name where they came from (From), never a value.
type Credentials struct {
	// Username and Password are HTTP basic authentication.
	Username string
	// Password is the basic authentication password.
	Password string
	// BearerToken is sent as "Authorization: Bearer"; it wins over basic
	// authentication, as with source-controller.
	BearerToken string
	// SSHKey is a PEM private key for SSH URLs.
	SSHKey []byte
	// SSHKeyPassword decrypts an encrypted SSHKey.
	SSHKeyPassword string
	// KnownHosts are the host keys, in known_hosts format, an SSH server
	// must present. Empty means the user's known_hosts files
	// ($SSH_KNOWN_HOSTS, else ~/.ssh/known_hosts and
	// /etc/ssh/ssh_known_hosts). Host keys are always checked.
	KnownHosts []byte
	// From names where the credentials were read, e.g. "Secret
	// flux-system/git-auth", for messages.
	From string
	// KnownHostsFrom names where KnownHosts were read.
	KnownHostsFrom string
}

// hasHTTP reports whether c holds HTTP credentials.
func (c Credentials) hasHTTP() bool {
	return c.Username != "" || c.Password != "" || c.BearerToken != ""
}

// hasSSHKey reports whether c holds an SSH key.
func (c Credentials) hasSSHKey() bool { return len(c.SSHKey) > 0 }

// OverriddenBy returns c with each kind of credential o holds replacing
// c's as a whole: the HTTP credentials (username, password, bearer token),
// the SSH key with its password, the known hosts. It is how flags and the
// environment win over the cluster's credentials.
func (c Credentials) OverriddenBy(o Credentials) Credentials {
	var from []string
	if o.hasHTTP() {
		c.Username, c.Password, c.BearerToken = o.Username, o.Password, o.BearerToken
	}
	if o.hasSSHKey() {
		c.SSHKey, c.SSHKeyPassword = o.SSHKey, o.SSHKeyPassword
	}
	if len(o.KnownHosts) > 0 {
		c.KnownHosts, c.KnownHostsFrom = o.KnownHosts, o.KnownHostsFrom
	}
	if (c.hasHTTP() && !o.hasHTTP()) || (c.hasSSHKey() && !o.hasSSHKey()) {
		from = append(from, c.From)
	}
	if o.hasHTTP() || o.hasSSHKey() {
		from = append(from, o.From)
	}
	c.From = strings.Join(from, " and ")
	return c
}

// key tells credentials apart without their values: where they came from.
func (c Credentials) key() string { return c.From + "\x00" + c.KnownHostsFrom }

// CredentialsFromEnv returns the credentials of the environment: HTTP
// bearer authentication from EnvBearerToken, else basic authentication
// from EnvToken, or from EnvUsername and EnvPassword; and the password of
// an SSH key. getenv is usually os.Getenv.
func CredentialsFromEnv(getenv func(string) string) Credentials {
	c := Credentials{SSHKeyPassword: getenv(EnvSSHKeyPassword)}
	username := getenv(EnvUsername)
	switch {
	case getenv(EnvBearerToken) != "":
		c.BearerToken, c.From = getenv(EnvBearerToken), "$"+EnvBearerToken
	case getenv(EnvToken) != "":
		if username == "" {
			username = "git"
		}
		c.Username, c.Password, c.From = username, getenv(EnvToken), "$"+EnvToken
	case username != "" || getenv(EnvPassword) != "":
		c.Username, c.Password, c.From = username, getenv(EnvPassword), "$"+EnvUsername+"/$"+EnvPassword
	}
	return c
}

// FluxCredentials reads a GitRepository's spec.secretRef Secret with the
// keys source-controller reads: username and password, bearerToken,
// identity (with password for an encrypted key) and known_hosts.
func FluxCredentials(secret *corev1.Secret) Credentials {
	data := secret.Data
	c := Credentials{
		BearerToken: string(data["bearerToken"]),
		From:        "Secret " + secret.Namespace + "/" + secret.Name,
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
	return c
}

// ArgoCredentials picks the credentials Argo CD uses for url among its
// Secrets: the repository Secret whose url is url, else the repo-creds
// Secret whose url is the longest prefix of url (argo-cd
// util/db/repository_secrets.go, getRepositoryCredentialIndex); keys
// username, password, bearerToken and sshPrivateKey. knownHosts is
// ArgoKnownHostsConfigMap's content. ok is false when no Secret matches.
func ArgoCredentials(secrets []corev1.Secret, url string, knownHosts []byte, knownHostsFrom string) (Credentials, bool) {
	want := normalizeGitURL(url)
	best, bestLength := -1, -1
	for i := range secrets {
		secretURL := normalizeGitURL(string(secrets[i].Data["url"]))
		switch secrets[i].Labels[ArgoSecretTypeLabel] {
		case ArgoRepository:
			if secretURL == want {
				best, bestLength = i, len(want)+1 // a repository Secret wins over any template
			}
		case ArgoRepoCreds:
			if secretURL != "" && strings.HasPrefix(want, secretURL) && len(secretURL) > bestLength {
				best, bestLength = i, len(secretURL)
			}
		}
	}
	if best < 0 {
		return Credentials{}, false
	}
	secret := &secrets[best]
	c := Credentials{
		Username:    string(secret.Data["username"]),
		Password:    string(secret.Data["password"]),
		BearerToken: string(secret.Data["bearerToken"]),
		SSHKey:      secret.Data["sshPrivateKey"],
		From:        "Secret " + secret.Namespace + "/" + secret.Name,
	}
	if len(knownHosts) > 0 {
		c.KnownHosts, c.KnownHostsFrom = knownHosts, knownHostsFrom
	}
	return c, true
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

// AuthMethod is how go-git authenticates to url with c: a bearer token or
// basic authentication over HTTP(S); over SSH the key, else the SSH agent,
// with host keys checked against KnownHosts or the user's known_hosts
// files. It is nil (anonymous, or go-git's SSH agent and known_hosts
// defaults) when c holds nothing for the URL's transport.
func (c Credentials) AuthMethod(url string) (transport.AuthMethod, error) {
	endpoint, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("parsing repository URL: %w", err)
	}
	switch endpoint.Protocol {
	case "http", "https":
		switch {
		case c.BearerToken != "":
			return &http.TokenAuth{Token: c.BearerToken}, nil
		case c.Username != "" || c.Password != "":
			return &http.BasicAuth{Username: c.Username, Password: c.Password}, nil
		}
	case "ssh":
		return c.sshAuth(endpoint)
	}
	return nil, nil
}

// sshAuth authenticates with the SSH key, else the SSH agent, checking
// host keys.
func (c Credentials) sshAuth(endpoint *transport.Endpoint) (transport.AuthMethod, error) {
	if !c.hasSSHKey() && len(c.KnownHosts) == 0 {
		return nil, nil // go-git's defaults: the agent and the user's known_hosts
	}
	user := endpoint.User
	if user == "" {
		user = "git"
	}
	var keys *gitssh.PublicKeys
	if c.hasSSHKey() {
		var missing *ssh.PassphraseMissingError
		if _, err := ssh.ParsePrivateKey(c.SSHKey); c.SSHKeyPassword == "" && errors.As(err, &missing) {
			return nil, fmt.Errorf("the SSH key from %s is encrypted and no password was given", c.From)
		}
		var err error
		if keys, err = gitssh.NewPublicKeys(user, c.SSHKey, c.SSHKeyPassword); err != nil {
			// x/crypto's parse errors describe the key's format, not its bytes.
			return nil, fmt.Errorf("reading the SSH key from %s: %w", c.From, err)
		}
	}
	hostKeys, err := c.hostKeys(endpoint)
	if err != nil {
		return nil, err
	}
	if keys != nil {
		keys.HostKeyCallbackHelper = hostKeys
		return keys, nil
	}
	agent, err := gitssh.NewSSHAgentAuth(user)
	if err != nil {
		return nil, fmt.Errorf("no SSH key given and no SSH agent: %w", err)
	}
	agent.HostKeyCallbackHelper = hostKeys
	return agent, nil
}

// hostKeys checks the server's key against KnownHosts, or the user's
// known_hosts files, with go-git's known_hosts database, which also
// orders the host key algorithms to ask for the key known_hosts has.
func (c Credentials) hostKeys(endpoint *transport.Endpoint) (gitssh.HostKeyCallbackHelper, error) {
	port := endpoint.Port
	if port == 0 {
		port = 22
	}
	hostPort := net.JoinHostPort(endpoint.Host, strconv.Itoa(port))
	from, files := c.KnownHostsFrom, []string(nil)
	if len(c.KnownHosts) > 0 {
		// go-git reads known_hosts from files only: host keys are public,
		// so they go through a temporary file, removed once read.
		file, err := os.CreateTemp("", "embedops-known-hosts-")
		if err != nil {
			return gitssh.HostKeyCallbackHelper{}, fmt.Errorf("writing known hosts: %w", err)
		}
		defer func() { _ = os.Remove(file.Name()) }()
		_, err = file.Write(c.KnownHosts)
		if err = errors.Join(err, file.Close()); err != nil {
			return gitssh.HostKeyCallbackHelper{}, fmt.Errorf("writing known hosts: %w", err)
		}
		files = []string{file.Name()}
	} else {
		from = "the user's known_hosts files"
	}
	db, err := gitssh.NewKnownHostsDb(files...)
	if err != nil {
		if len(files) > 0 { // the temporary file means nothing to the reader
			err = errors.New(strings.ReplaceAll(err.Error(), files[0], "known_hosts"))
		}
		return gitssh.HostKeyCallbackHelper{}, fmt.Errorf("reading known hosts from %s: %w", from, err)
	}
	check := db.HostKeyCallback()
	explained := func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := check(host, remote, key)
		var keyErr *knownhosts.KeyError
		switch {
		case errors.As(err, &keyErr) && len(keyErr.Want) > 0:
			return fmt.Errorf("host key mismatch: %s presented %s %s, which does not match %s", host, key.Type(), ssh.FingerprintSHA256(key), from)
		case errors.As(err, &keyErr):
			return fmt.Errorf("unknown host key: %s presented %s %s, which is not in %s", host, key.Type(), ssh.FingerprintSHA256(key), from)
		}
		return err
	}
	return gitssh.HostKeyCallbackHelper{HostKeyCallback: explained, HostKeyAlgorithms: db.HostKeyAlgorithms(hostPort)}, nil
}

// hostKeyHint says what a failed host key negotiation means: known_hosts
// names the host with keys of other types only, so go-git asked for those
// and the server has none. x/crypto's error has no exported type, hence
// the match on its text.
func hostKeyHint(err error) error {
	if err != nil && strings.Contains(err.Error(), "no common algorithm for host key") {
		return fmt.Errorf("host key mismatch: the known hosts have no key of a type the server offers: %w", err)
	}
	return err
}
