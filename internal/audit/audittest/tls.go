package audittest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/fluxcd/gitkit"
)

// CA is a private certificate authority made for one test: it signs
// certificates for 127.0.0.1 that serve both as server and as client
// certificates.
type CA struct {
	// PEM is the CA's certificate.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA named name, valid for an hour.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificate: %w", err)
	}
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}, nil
}

// Issue signs a certificate for 127.0.0.1 named name, for servers and
// clients, and returns it and its private key as PEM.
func (ca *CA) Issue(name string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, fmt.Errorf("choosing a serial number: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate of %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the key of %s: %w", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// TLSGitServer serves the git repositories in a directory over HTTPS on
// 127.0.0.1 (git's smart HTTP, through gitkit and git-upload-pack), with a
// certificate its CA signed, and completes a handshake only with a client
// that presents a certificate the same CA signed.
type TLSGitServer struct {
	// URL is https://127.0.0.1:<port>; a repository is URL/<directory>.
	URL    string
	server *httptest.Server
}

// ServeTLSGit starts a TLSGitServer for the repositories in root.
func ServeTLSGit(root string, ca *CA) (*TLSGitServer, error) {
	service := gitkit.New(gitkit.Config{Dir: root})
	if err := service.Setup(); err != nil {
		return nil, fmt.Errorf("setting up the git service: %w", err)
	}
	certPEM, keyPEM, err := ca.Issue("git-server")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the server certificate: %w", err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(ca.cert)
	server := httptest.NewUnstartedServer(service)
	server.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    clients,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	// The handshakes the tests refuse on purpose are not worth a log line.
	server.Config.ErrorLog = log.New(io.Discard, "", 0)
	server.StartTLS()
	if !strings.HasPrefix(server.URL, "https://127.0.0.1:") {
		server.Close()
		return nil, fmt.Errorf("the git server listens on %s, not on 127.0.0.1", server.URL)
	}
	return &TLSGitServer{URL: server.URL, server: server}, nil
}

// Close stops the server.
func (s *TLSGitServer) Close() { s.server.Close() }
