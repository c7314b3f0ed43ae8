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
	// CABundle holds PEM certificates an HTTPS server's certificate may
	// chain to, trusted besides the system's (go-git adds them to the
	// system pool, as source-controller's clone does).
	CABundle []byte
	// CABundleFrom names where CABundle was read.
	CABundleFrom string
	// ClientCert is a PEM client certificate, with ClientKey its private
	// key, presented to an HTTPS server that asks for one.
	ClientCert []byte
	// ClientKey is ClientCert's PEM private key.
	ClientKey []byte
	// ClientCertFrom names where ClientCert and ClientKey were read.
	ClientCertFrom string
}

// hasHTTP reports whether c holds HTTP credentials.
func (c Credentials) hasHTTP() bool {
	return c.Username != "" || c.Password != "" || c.BearerToken != ""
}

// hasSSHKey reports whether c holds an SSH key.
func (c Credentials) hasSSHKey() bool { return len(c.SSHKey) > 0 }

// hasClientCert reports whether c holds a client certificate or its key.
func (c Credentials) hasClientCert() bool { return len(c.ClientCert) > 0 || len(c.ClientKey) > 0 }

// OverriddenBy returns c with each kind of credential o holds replacing
// c's as a whole: the HTTP credentials (username, password, bearer token),
// the SSH key with its password, the known hosts, the CA bundle, the
// client certificate with its key. It is how flags and the environment win
// over the cluster's credentials.
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
	if len(o.CABundle) > 0 {
		c.CABundle, c.CABundleFrom = o.CABundle, o.CABundleFrom
	}
	if o.hasClientCert() {
		c.ClientCert, c.ClientKey, c.ClientCertFrom = o.ClientCert, o.ClientKey, o.ClientCertFrom
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
func (c Credentials) key() string {
	return strings.Join([]string{c.From, c.KnownHostsFrom, c.CABundleFrom, c.ClientCertFrom}, "\x00")
}

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
