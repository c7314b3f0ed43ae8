//go:build linux

package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certValidity outlives any test run.
const certValidity = 24 * time.Hour

// nodePKI is the real node's certificate authority and the files made from
// it, all in dir: the API server's serving certificate, client
// certificates, the ServiceAccount signing key and kubeconfigs.
type nodePKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	serial int64
}

// newNodePKI creates a CA and writes it to dir/ca.crt.
func newNodePKI(dir string) (*nodePKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the PKI directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "embedops-node-ca"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA: %w", err)
	}
	p := &nodePKI{dir: dir, ca: ca, caKey: key, serial: 1}
	return p, writePEM(p.caPath(), "CERTIFICATE", der)
}

// caPath is the CA certificate's file.
func (p *nodePKI) caPath() string { return filepath.Join(p.dir, "ca.crt") }

// issue writes name.crt and name.key: a certificate for subject, a client
// certificate when ips and dnsNames are empty, else a serving one.
func (p *nodePKI) issue(name string, subject pkix.Name, ips []net.IP, dnsNames []string) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating the %s key: %w", name, err)
	}
	p.serial++
	usage := x509.ExtKeyUsageClientAuth
	if len(ips)+len(dnsNames) > 0 {
		usage = x509.ExtKeyUsageServerAuth
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, p.ca, key.Public(), p.caKey)
	if err != nil {
		return "", "", fmt.Errorf("signing the %s certificate: %w", name, err)
	}
	certPath, keyPath = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writeKey(keyPath, key)
}

// serviceAccountKeys writes the key pair the API server signs and checks
// ServiceAccount tokens with (--service-account-signing-key-file and
// --service-account-key-file; kube-controller-manager's
// --service-account-private-key-file).
func (p *nodePKI) serviceAccountKeys() (privatePath, publicPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating the ServiceAccount key: %w", err)
	}
	privatePath, publicPath = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	public, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("encoding the ServiceAccount public key: %w", err)
	}
	if err := writePEM(publicPath, "PUBLIC KEY", public); err != nil {
		return "", "", err
	}
	return privatePath, publicPath, writeKey(privatePath, key)
}

// kubeconfig writes name.kubeconfig for a client certificate reaching
// server.
func (p *nodePKI) kubeconfig(name, server string, subject pkix.Name) (string, error) {
	certPath, keyPath, err := p.issue(name, subject, nil, nil)
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.dir, name+".kubeconfig")
	return path, writeKubeconfig(path, server, p.caPath(), certPath, keyPath)
}

// writeKubeconfig writes a kubeconfig of one cluster, user and context.
func writeKubeconfig(path, server, caPath, certPath, keyPath string) error {
	config := clientcmdapi.NewConfig()
	config.Clusters["node"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caPath}
	config.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: certPath, ClientKey: keyPath}
	config.Contexts["node"] = &clientcmdapi.Context{Cluster: "node", AuthInfo: "node"}
	config.CurrentContext = "node"
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writePEM writes one PEM block.
func writePEM(path, blockType string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writeKey writes an EC private key in PKCS#8.
func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return writePEM(path, "PRIVATE KEY", der)
}
