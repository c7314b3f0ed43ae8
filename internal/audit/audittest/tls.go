package audittest

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/fluxcd/gitkit"

	"github.com/embedops/embedops/test/testca"
)

// TLSGitServer serves the git repositories in a directory over HTTPS on
// 127.0.0.1 (git's smart HTTP, through gitkit and git-upload-pack), with a
// certificate its CA signed, and completes a handshake only with a client
// that presents a certificate the same CA signed (testca.CA.Issue makes
// both).
type TLSGitServer struct {
	// URL is https://127.0.0.1:<port>; a repository is URL/<directory>.
	URL    string
	server *httptest.Server
}

// ServeTLSGit starts a TLSGitServer for the repositories in root.
func ServeTLSGit(root string, ca *testca.CA) (*TLSGitServer, error) {
	service := gitkit.New(gitkit.Config{Dir: root})
	if err := service.Setup(); err != nil {
		return nil, fmt.Errorf("setting up the git service: %w", err)
	}
	cert, err := ca.KeyPair("git-server")
	if err != nil {
		return nil, err
	}
	server := httptest.NewUnstartedServer(service)
	server.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    ca.Pool(),
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
