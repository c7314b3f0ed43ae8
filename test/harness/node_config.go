//go:build linux

package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The real node's addresses. All are in 198.18.0.0/15, which RFC 2544
// reserves for benchmark tests and no real network routes, and all exist
// only inside the node's network namespace.
const (
	// NodeAddress is the node's InternalIP, on its loopback: the API server
	// advertises it (so the kubernetes Service leads to it), the kubelet and
	// cluster DNS listen on it.
	NodeAddress = "198.18.0.2"
	// PodCIDR is the pods' range, on the CNI bridge (host-local IPAM).
	PodCIDR = "198.18.1.0/24"
	// ServiceCIDR is the Services' range (kube-apiserver
	// --service-cluster-ip-range); kube-proxy's iptables rules make it real.
	ServiceCIDR = "198.19.0.0/16"
	// ClusterDomain is the kubelet's clusterDomain and CoreDNS's zone.
	ClusterDomain = "cluster.local"
	// podBridge is the CNI bridge.
	podBridge = "cni0"
	// cniBinDir is where Debian's containernetworking-plugins installs.
	cniBinDir = "/usr/lib/cni"
)

// Ports inside the node's namespace: the upstream defaults, free there
// because nothing else runs in it.
const (
	apiServerPort    = 6443
	etcdClientPort   = 2379
	etcdPeerPort     = 2380
	kcmPort          = 10257
	schedulerPort    = 10259
	kubeletPort      = 10250
	kubeletHealthz   = 10248
	kubeProxyHealthz = 10256
	kubeProxyMetrics = 10249
	dnsHealthPort    = 8080
	dnsReadyPort     = 8181
	// snapshotControllerMetrics is the snapshot-controller's
	// --http-endpoint, its readiness probe.
	snapshotControllerMetrics = 9808
)

// containerdConfig is containerd 1.6's config (version 2) for the node,
// every path under dir, with the settings REAL-NODE.md found necessary.
func containerdConfig(dir, sandboxImage string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Snapshotters that probe the host's filesystems or modules are not needed.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  # Default /opt/containerd.
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  # The pause image is built here and imported before the kubelet starts.
  sandbox_image = %[5]q
  # This VM drops CAP_SYS_RESOURCE: runc cannot set the sandbox's -998
  # oom_score_adj ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  # Pod network namespaces under state, not /var/run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # The kubelet's cgroupDriver is cgroupfs: no systemd here.
        SystemdCgroup = false
        # runc's state, default /run/containerd/runc.
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), containerdSocket(dir), filepath.Join(dir, "opt"),
		sandboxImage, filepath.Join(dir, "runc"), cniBinDir, filepath.Join(dir, "net.d"))
}

// containerdSocket is containerd's socket in its directory.
func containerdSocket(dir string) string { return filepath.Join(dir, "containerd.sock") }

// cniConfig is the pod network: the bridge plugin with host-local IPAM on
// PodCIDR (its state under ipamDir), and portmap. No ipMasq: pods have no
// way out of the node's namespace, and need none.
func cniConfig(ipamDir string) ([]byte, error) {
	config := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "embedops-node",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      podBridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": ipamDir,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the CNI config: %w", err)
	}
	return data, nil
}

// kubeletConfig is the KubeletConfiguration (kubelet.config.k8s.io/v1beta1).
func kubeletConfig(o kubeletOptions) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The host mounts cgroup v1 hierarchies; v1.37 refuses them unless told.
failCgroupV1: false
# No systemd as PID 1.
cgroupDriver: cgroupfs
# Pods' cgroups go under the node's own cgroup, removed at Stop.
cgroupRoot: %[1]s
failSwapOn: false
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: %[4]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
# CoreDNS runs as a node process listening on the node's address.
clusterDNS: [%[3]s]
clusterDomain: %[6]s
# No host resolver: a pod resolves cluster names only.
resolvConf: ""
# Default /var/log/pods.
podLogsDir: %[7]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[8]s}
authorization:
  mode: Webhook
serializeImagePulls: false
# Images are imported, never pulled: keep them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Memory only: the disk is shared with other work, whose use is not the
# node's to evict pods for.
evictionHard: {memory.available: "100Mi"}
`, o.cgroupRoot, o.runtimeSocket, NodeAddress, kubeletPort, kubeletHealthz, ClusterDomain, o.podLogsDir, o.caPath)
}

// kubeletOptions are the node-specific values of kubeletConfig.
type kubeletOptions struct {
	cgroupRoot, runtimeSocket, podLogsDir, caPath string
}

// kubeProxyConfig is the KubeProxyConfiguration
// (kubeproxy.config.k8s.io/v1alpha1): iptables mode inside the node's
// namespace.
func kubeProxyConfig(kubeconfig, nodeName string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
clusterCIDR: %[3]s
healthzBindAddress: 127.0.0.1:%[4]d
metricsBindAddress: 127.0.0.1:%[5]d
# NodePorts on the node's address only (kube-proxy warns when unset, and
# then sets route_localnet to serve them on loopback too).
nodePortAddresses: [primary]
# Zero leaves the host's conntrack table size and timeouts as they are
# (nf_conntrack_max is global, not per namespace).
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, nodeName, PodCIDR, kubeProxyHealthz, kubeProxyMetrics)
}

// corefile is CoreDNS's configuration: Services and pods of ClusterDomain
// from the API server, nothing else (no forward plugin).
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`.:53 {
    errors
    health 127.0.0.1:%[1]d
    ready 127.0.0.1:%[2]d
    kubernetes %[3]s in-addr.arpa ip6.arpa {
        kubeconfig %[4]s node
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
`, dnsHealthPort, dnsReadyPort, ClusterDomain, kubeconfig)
}

// writeFiles writes each file, creating its directory.
func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// flags joins name=value pairs into --name=value arguments.
func flags(pairs ...string) []string {
	args := make([]string, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		args = append(args, "--"+pairs[i]+"="+pairs[i+1])
	}
	return args
}

// joinComma joins values with commas.
func joinComma(values ...string) string { return strings.Join(values, ",") }
