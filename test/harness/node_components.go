//go:build linux

package harness

import (
	"crypto/x509/pkix"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
)

// nodeFiles are the paths the node's components share.
type nodeFiles struct {
	dir string
	// adminKubeconfig reaches the API server inside the node's namespace
	// as system:masters (controllers, kube-proxy, CoreDNS).
	adminKubeconfig string
	// kubeletKubeconfig is the kubelet's, as system:node:<name>.
	kubeletKubeconfig        string
	ca, apiCert, apiKey      string
	kubeletClientCert        string
	kubeletClientKey         string
	saPrivate, saPublic      string
	testCert, testKey        string
	containerdDir, cniIPAM   string
	kubeletDir, podLogsDir   string
	etcdDir, volumesDir      string
	kubeProxyConfig, coreDNS string
}

// nodePath is a path under the node's directory.
func (f *nodeFiles) path(elem ...string) string {
	return filepath.Join(append([]string{f.dir}, elem...)...)
}

// inClusterServer is the API server's address inside the node's namespace.
func inClusterServer() string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(apiServerPort))
}

// writePKI creates the CA, the API server's serving certificate, the
// clients' certificates and kubeconfigs, and the ServiceAccount keys.
func (f *nodeFiles) writePKI(nodeName string) error {
	p, err := newNodePKI(f.path("pki"))
	if err != nil {
		return err
	}
	f.ca = p.caPath()
	// The names and addresses clients use: the test's forwarder and the
	// node's processes (127.0.0.1), pods (the kubernetes Service's first
	// address and names), the advertised address.
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeAddress), firstServiceAddress()}
	names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain}
	if f.apiCert, f.apiKey, err = p.issue("apiserver", pkix.Name{CommonName: "kube-apiserver"}, ips, names); err != nil {
		return err
	}
	masters := pkix.Name{CommonName: "embedops-node-admin", Organization: []string{"system:masters"}}
	if f.kubeletClientCert, f.kubeletClientKey, err = p.issue("apiserver-kubelet-client", masters, nil, nil); err != nil {
		return err
	}
	if f.testCert, f.testKey, err = p.issue("test-admin", masters, nil, nil); err != nil {
		return err
	}
	if f.adminKubeconfig, err = p.kubeconfig("admin", inClusterServer(), masters); err != nil {
		return err
	}
	// The Node authorizer and NodeRestriction admission know a kubelet by
	// this identity.
	node := pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}
	if f.kubeletKubeconfig, err = p.kubeconfig("kubelet", inClusterServer(), node); err != nil {
		return err
	}
	f.saPrivate, f.saPublic, err = p.serviceAccountKeys()
	return err
}

// firstServiceAddress is the kubernetes Service's ClusterIP: the first
// address of ServiceCIDR.
func firstServiceAddress() net.IP {
	_, cidr, _ := net.ParseCIDR(ServiceCIDR)
	ip := cidr.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1)
}

// etcdArgs run etcd on the namespace's loopback; fsync is skipped, the data
// lives for one test run.
func (f *nodeFiles) etcdArgs() []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	return flags(
		"name", "node",
		"data-dir", f.etcdDir,
		"listen-client-urls", client,
		"advertise-client-urls", client,
		"listen-peer-urls", peer,
		"initial-advertise-peer-urls", peer,
		"initial-cluster", "node="+peer,
		"unsafe-no-fsync", "true",
		"log-level", "warn",
	)
}

// apiServerArgs listen on every address of the namespace and advertise
// NodeAddress, so the kubernetes Service's endpoint is reachable from pods
// (REAL-NODE.md: a loopback advertise address is refused).
func (f *nodeFiles) apiServerArgs() []string {
	return flags(
		"etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"bind-address", "0.0.0.0",
		"secure-port", strconv.Itoa(apiServerPort),
		"advertise-address", NodeAddress,
		"service-cluster-ip-range", ServiceCIDR,
		"tls-cert-file", f.apiCert,
		"tls-private-key-file", f.apiKey,
		"client-ca-file", f.ca,
		"service-account-issuer", "https://kubernetes.default.svc."+ClusterDomain,
		"service-account-key-file", f.saPublic,
		"service-account-signing-key-file", f.saPrivate,
		"authorization-mode", joinComma("Node", "RBAC"),
		"enable-admission-plugins", "NodeRestriction",
		"kubelet-client-certificate", f.kubeletClientCert,
		"kubelet-client-key", f.kubeletClientKey,
		"kubelet-preferred-address-types", "InternalIP",
	)
}

// controllerManagerArgs run every default controller; node IPAM is off,
// host-local assigns PodCIDR.
func (f *nodeFiles) controllerManagerArgs() []string {
	return flags(
		"kubeconfig", f.adminKubeconfig,
		"authentication-kubeconfig", f.adminKubeconfig,
		"authorization-kubeconfig", f.adminKubeconfig,
		"bind-address", "127.0.0.1",
		"secure-port", strconv.Itoa(kcmPort),
		"leader-elect", "false",
		"use-service-account-credentials", "true",
		"service-account-private-key-file", f.saPrivate,
		// Published as the kube-root-ca.crt ConfigMap pods' tokens carry.
		"root-ca-file", f.ca,
	)
}

// schedulerArgs.
func (f *nodeFiles) schedulerArgs() []string {
	return flags(
		"kubeconfig", f.adminKubeconfig,
		"authentication-kubeconfig", f.adminKubeconfig,
		"authorization-kubeconfig", f.adminKubeconfig,
		"bind-address", "127.0.0.1",
		"secure-port", strconv.Itoa(schedulerPort),
		"leader-elect", "false",
	)
}

// kubeletArgs; the rest is in its config file.
func (f *nodeFiles) kubeletArgs(nodeName string) []string {
	return flags(
		"config", f.path("kubelet.yaml"),
		"kubeconfig", f.kubeletKubeconfig,
		"root-dir", f.kubeletDir,
		// Default /var/lib/kubelet/pki, not under --root-dir.
		"cert-dir", filepath.Join(f.kubeletDir, "pki"),
		"hostname-override", nodeName,
		"node-ip", NodeAddress,
	)
}

// kubeProxyArgs; the rest is in its config file.
func (f *nodeFiles) kubeProxyArgs() []string {
	return flags("config", f.kubeProxyConfig)
}

// coreDNSArgs.
func (f *nodeFiles) coreDNSArgs() []string {
	return []string{"-conf", f.coreDNS}
}
