package audit

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// remote is how go-git reaches one repository: the authentication and,
// over HTTPS, the CA certificates and client certificate, checked before
// use. It knows where each came from, to explain a failure.
type remote struct {
	url      string
	host     string
	auth     transport.AuthMethod
	protocol string
	https    bool
	caBundle []byte
	cert     []byte
	key      []byte
	// caFrom and certFrom name where the CA bundle and the client
	// certificate were read.
	caFrom, certFrom string
}

// remoteFor prepares the transport settings of c for url. A CA bundle
// without a certificate, or a client certificate without its key or that
// does not parse, is an error naming where it was read, never its value.
func (c Credentials) remoteFor(url string) (remote, error) {
	auth, err := c.AuthMethod(url)
	if err != nil {
		return remote{}, err
	}
	endpoint, err := transport.NewEndpoint(url)
	if err != nil {
		return remote{}, fmt.Errorf("parsing repository URL: %w", err)
	}
	r := remote{url: url, host: endpointHost(endpoint), auth: auth, protocol: endpoint.Protocol, https: endpoint.Protocol == "https",
		caFrom: c.CABundleFrom, certFrom: c.ClientCertFrom}
	if !r.https {
		return r, nil // the TLS settings are for HTTPS servers only
	}
	if len(c.CABundle) > 0 {
		if !x509.NewCertPool().AppendCertsFromPEM(c.CABundle) {
			return remote{}, fmt.Errorf("the CA certificates from %s hold no PEM certificate", c.CABundleFrom)
		}
		r.caBundle = c.CABundle
	}
	switch {
	case !c.hasClientCert():
	case len(c.ClientCert) == 0:
		return remote{}, fmt.Errorf("the client key from %s comes without its certificate", c.ClientCertFrom)
	case len(c.ClientKey) == 0:
		return remote{}, fmt.Errorf("the client certificate from %s has no key", c.ClientCertFrom)
	default:
		// crypto/tls describes what is wrong with the PEM, never its bytes.
		if _, err := tls.X509KeyPair(c.ClientCert, c.ClientKey); err != nil {
			return remote{}, fmt.Errorf("reading the client certificate and key from %s: %w", c.ClientCertFrom, err)
		}
		r.cert, r.key = c.ClientCert, c.ClientKey
	}
	return r, nil
}

// endpointHost is host:port of an endpoint, the port defaulted by scheme.
func endpointHost(endpoint *transport.Endpoint) string {
	port := endpoint.Port
	if port == 0 {
		switch endpoint.Protocol {
		case "https":
			port = 443
		case "http":
			port = 80
		case "ssh":
			port = 22
		}
	}
	if port == 0 {
		return endpoint.Host
	}
	return net.JoinHostPort(endpoint.Host, strconv.Itoa(port))
}

// fetchOptions fetch every branch and tag from origin.
func (r remote) fetchOptions() *git.FetchOptions {
	return &git.FetchOptions{
		RemoteName: git.DefaultRemoteName, Auth: r.auth, Tags: git.AllTags, Force: true,
		CABundle: r.caBundle, ClientCert: r.cert, ClientKey: r.key,
	}
}

// listOptions list the remote's references.
func (r remote) listOptions() *git.ListOptions {
	return &git.ListOptions{Auth: r.auth, CABundle: r.caBundle, ClientCert: r.cert, ClientKey: r.key}
}

// explain says what a failed connection means: an SSH host key or a TLS
// certificate refused, naming the host and where the trusted keys or
// certificates came from.
func (r remote) explain(err error) error {
	if err == nil {
		return nil
	}
	if !r.https {
		return hostKeyHint(err)
	}
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("TLS: the certificate of %s is not signed by a trusted CA (trusted: the system's%s): %w", r.host, r.trusted(), err)
	case errors.As(err, &hostname):
		return fmt.Errorf("TLS: the certificate of %s is not valid for that host: %w", r.host, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("TLS: the certificate of %s is not valid: %w", r.host, err)
	case refusedClientCert(err):
		return fmt.Errorf("TLS: %s refused the connection: it asks for a client certificate, and %s: %w", r.host, r.clientCertGiven(err), err)
	}
	return err
}

// trusted names the CA certificates trusted besides the system's.
func (r remote) trusted() string {
	if len(r.caBundle) == 0 {
		return ""
	}
	return " and those of " + r.caFrom
}

// clientCertGiven says what became of the client certificate. crypto/tls
// presents one only when the server names its issuer among those it
// accepts, and sends none otherwise.
func (r remote) clientCertGiven(err error) string {
	switch {
	case len(r.cert) == 0:
		return "none was given"
	case strings.Contains(err.Error(), "tls: certificate required"):
		return "the one from " + r.certFrom + " is not signed by a CA it accepts"
	}
	return "it refused the one from " + r.certFrom
}

// refusedClientCert reports whether the server ended the handshake over
// the client certificate. A TLS alert from the server has no exported
// type in crypto/tls, hence the match on its text.
func refusedClientCert(err error) bool {
	for _, alert := range []string{"tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority",
		"tls: certificate expired", "tls: certificate revoked", "tls: unsupported certificate"} {
		if strings.Contains(err.Error(), "remote error: "+alert) {
			return true
		}
	}
	return false
}
