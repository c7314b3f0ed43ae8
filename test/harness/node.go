//go:build linux

package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Real node timings.
const (
	// nodeStartTimeout bounds StartNode on 2 busy cores.
	nodeStartTimeout = 5 * time.Minute
	// nodeNamePrefix starts every real node's name, network namespace and
	// directory: embedops-node-<pid>-<random>.
	nodeNamePrefix = "embedops-node-"
)

// NodeOptions adjust the real node.
type NodeOptions struct {
	// SandboxImage is containerd's pause image; it must be among Images.
	SandboxImage string
	// Images are image archives (WriteImageArchive) imported into
	// containerd before the kubelet starts.
	Images []string
}

// Node is a one-node Kubernetes cluster on this machine, run from ./bin and
// Debian's containerd: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd, the kubelet, kube-proxy (iptables) and
// CoreDNS, all inside a network namespace of its own, and an in-process
// provisioner of local volumes. Pods really run. The test process reaches
// the API server through a forwarder on 127.0.0.1. Stop ends it all and
// puts the host back as it was.
type Node struct {
	// Name is the node's name, its network namespace's and its
	// directory's.
	Name string
	// Dir holds all its state.
	Dir string
	// Kubeconfig is an administrator kubeconfig reaching the API server
	// through the forwarder.
	Kubeconfig string
	// Config, Client, Clientset and Scheme reach the API server as an
	// administrator.
	Config    *rest.Config
	Client    client.Client
	Clientset kubernetes.Interface
	Scheme    *runtime.Scheme

	files     nodeFiles
	bins      map[string]string
	host      *hostState
	network   *nodeNetwork
	forwarder *forwarder
	processes []*Process
	// stopProvisioner ends the local volume provisioner.
	stopProvisioner func()
	stopOnce        sync.Once
	stopErr         error
}

// nodeBinaries are the node's programs from ./bin.
var nodeBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns", "snapshot-controller"}

// StartNode starts a real node and waits until it is Ready, cluster DNS
// answers and the default ServiceAccount exists. A failed start tears down
// what it started and returns an error with the components' log tails.
func StartNode(ctx context.Context, opts NodeOptions) (*Node, error) {
	if reason := NodeUnsupported(); reason != "" {
		return nil, errors.New(reason)
	}
	if err := checkNodeRuntime(); err != nil {
		return nil, err
	}
	bins, err := nodeBinaryPaths()
	if err != nil {
		return nil, err
	}
	// Waits for another process's node; Stop releases it.
	if err := lockNodeHost(); err != nil {
		return nil, err
	}
	sweepStaleNodes()
	n := &Node{Name: fmt.Sprintf("%s%d-%06x", nodeNamePrefix, os.Getpid(), rand.Uint32()>>8), bins: bins}
	ctx, cancel := context.WithTimeout(ctx, nodeStartTimeout)
	defer cancel()
	trackNode(n)
	if err := n.start(ctx, opts); err != nil {
		err = fmt.Errorf("starting the real node %s: %w\n%s", n.Name, err, n.logTails())
		return nil, errors.Join(err, n.Stop())
	}
	return n, nil
}

// nodeBinaryPaths finds nodeBinaries in ./bin.
func nodeBinaryPaths() (map[string]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, name := range nodeBinaries {
		if bins[name], err = Binary(root, name); err != nil {
			return nil, err
		}
	}
	return bins, nil
}

// start runs the steps of a node's start in order.
func (n *Node) start(ctx context.Context, opts NodeOptions) error {
	steps := []func(context.Context, NodeOptions) error{
		n.prepareHost, n.writeFiles, n.startControlPlane, n.connect,
		n.startRuntime, n.startKubelet, n.startServices, n.startStorage, n.waitUsable,
	}
	for _, step := range steps {
		if err := step(ctx, opts); err != nil {
			return err
		}
	}
	return nil
}

// prepareHost records the host's state, then creates the node's directory,
// cgroup and network namespace.
func (n *Node) prepareHost(_ context.Context, _ NodeOptions) error {
	host, err := recordHost()
	if err != nil {
		return err
	}
	if host.Cgroup, err = newNodeCgroup(n.Name); err != nil {
		return err
	}
	n.host, n.Dir = host, filepath.Join(os.TempDir(), n.Name)
	if err := os.Mkdir(n.Dir, 0o755); err != nil {
		return fmt.Errorf("creating the node directory: %w", err)
	}
	err = host.Cgroup.create()
	// Saved with the cgroups made so far, so that a sweep can undo a
	// crashed run.
	if err := errors.Join(err, host.save(n.Dir)); err != nil {
		return err
	}
	n.network, err = createNodeNetwork(n.Name)
	return err
}

// writeFiles writes the PKI, kubeconfigs and every component's config.
func (n *Node) writeFiles(_ context.Context, opts NodeOptions) error {
	f := &n.files
	f.dir = n.Dir
	f.containerdDir, f.cniIPAM = f.path("containerd"), f.path("cni-ipam")
	f.kubeletDir, f.podLogsDir = f.path("kubelet"), f.path("pod-logs")
	f.etcdDir, f.volumesDir = f.path("etcd"), f.path("volumes")
	f.kubeProxyConfig, f.coreDNS = f.path("kube-proxy.yaml"), f.path("Corefile")
	if err := f.writePKI(n.Name); err != nil {
		return err
	}
	cni, err := cniConfig(f.cniIPAM)
	if err != nil {
		return err
	}
	for _, dir := range []string{f.volumesDir, f.kubeletDir, f.podLogsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	return writeFiles(map[string][]byte{
		f.path("containerd", "config.toml"):               []byte(containerdConfig(f.containerdDir, opts.SandboxImage)),
		f.path("containerd", "net.d", "10-node.conflist"): cni,
		f.path("kubelet.yaml"): []byte(kubeletConfig(kubeletOptions{
			cgroupRoot: n.host.Cgroup.Path, runtimeSocket: containerdSocket(f.containerdDir), podLogsDir: f.podLogsDir, caPath: f.ca,
		})),
		f.kubeProxyConfig: []byte(kubeProxyConfig(f.adminKubeconfig, n.Name)),
		f.coreDNS:         []byte(corefile(f.adminKubeconfig)),
	})
}

// startControlPlane starts etcd, kube-apiserver, the controller manager and
// the scheduler.
func (n *Node) startControlPlane(ctx context.Context, _ NodeOptions) error {
	f := &n.files
	if err := n.run(ctx, "etcd", f.etcdArgs(), n.probeHTTP(etcdClientPort, "/health", false)); err != nil {
		return err
	}
	if err := n.run(ctx, "kube-apiserver", f.apiServerArgs(), n.probeHTTP(apiServerPort, "/readyz", true)); err != nil {
		return err
	}
	if err := n.run(ctx, "kube-controller-manager", f.controllerManagerArgs(), n.probeHTTP(kcmPort, "/healthz", true)); err != nil {
		return err
	}
	return n.run(ctx, "kube-scheduler", f.schedulerArgs(), n.probeHTTP(schedulerPort, "/healthz", true))
}

// connect starts the forwarder and the test process's clients.
func (n *Node) connect(_ context.Context, _ NodeOptions) error {
	fwd, err := startForwarder(n.network.dial, net.JoinHostPort("127.0.0.1", strconv.Itoa(apiServerPort)))
	if err != nil {
		return err
	}
	n.forwarder = fwd
	n.Kubeconfig = n.files.path("kubeconfig")
	if err := writeKubeconfig(n.Kubeconfig, "https://"+fwd.addr(), n.files.ca, n.files.testCert, n.files.testKey); err != nil {
		return err
	}
	config := &rest.Config{
		Host:            "https://" + fwd.addr(),
		TLSClientConfig: rest.TLSClientConfig{CAFile: n.files.ca, CertFile: n.files.testCert, KeyFile: n.files.testKey},
		QPS:             100,
		Burst:           200,
	}
	built, err := newClients(config)
	if err != nil {
		return err
	}
	n.Config, n.Scheme, n.Client, n.Clientset = config, built.scheme, built.client, built.clientset
	return nil
}

// startRuntime starts containerd and imports the images.
func (n *Node) startRuntime(ctx context.Context, opts NodeOptions) error {
	socket := containerdSocket(n.files.containerdDir)
	args := []string{"--config", n.files.path("containerd", "config.toml")}
	ready := func(context.Context) bool { return exec.Command("ctr", "--address", socket, "version").Run() == nil }
	if err := n.runReady(ctx, "containerd", "containerd", args, ready); err != nil {
		return err
	}
	for _, archive := range opts.Images {
		if err := n.ImportImage(ctx, archive); err != nil {
			return err
		}
	}
	return nil
}

// ImportImage imports an image archive into the node's containerd, in the
// namespace the kubelet's images live in.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	socket := containerdSocket(n.files.containerdDir)
	out, err := exec.CommandContext(ctx, "ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s: %w: %s", archive, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startKubelet starts the kubelet and waits for the node to be Ready.
func (n *Node) startKubelet(ctx context.Context, _ NodeOptions) error {
	if err := n.run(ctx, "kubelet", n.files.kubeletArgs(n.Name), n.probeHTTP(kubeletHealthz, "/healthz", false)); err != nil {
		return err
	}
	return waitFor(ctx, "the node to be Ready", n.nodeReady)
}

// startServices starts kube-proxy and cluster DNS.
func (n *Node) startServices(ctx context.Context, _ NodeOptions) error {
	if err := n.run(ctx, "kube-proxy", n.files.kubeProxyArgs(), n.probeHTTP(kubeProxyHealthz, "/healthz", false)); err != nil {
		return err
	}
	return n.run(ctx, "coredns", n.files.coreDNSArgs(), n.probeHTTP(dnsReadyPort, "/ready", false))
}

// startStorage installs the snapshot CRDs, creates the StorageClasses, the
// CSIDrivers and the VolumeSnapshotClasses, starts the provisioner, its
// snapshotter and its CSI node plugins, waits for the kubelet to register
// them, and runs the snapshot-controller inside the node's namespace.
func (n *Node) startStorage(ctx context.Context, _ NodeOptions) error {
	if err := InstallSnapshotCRDs(n.Config); err != nil {
		return err
	}
	snapshots, err := snapshotclient.NewForConfig(n.Config)
	if err != nil {
		return fmt.Errorf("creating a snapshot client: %w", err)
	}
	err = createStorageObjects(ctx, n.Clientset, snapshots, nodeStorageClasses(),
		csiDrivers(LocalProvisionerName, LocalNoCloneProvisionerName), snapshotClasses(LocalProvisionerName, LocalNoCloneProvisionerName))
	if err != nil {
		return err
	}
	logFile, err := os.Create(n.files.path("provisioner.log"))
	if err != nil {
		return fmt.Errorf("creating the provisioner log: %w", err)
	}
	logger := funcr.New(func(prefix, args string) { _, _ = fmt.Fprintln(logFile, prefix, args) }, funcr.Options{Verbosity: 2})
	// Volumes in the node's volumes directory, snapshots beside it.
	driver, err := newVolumeDriver(LocalProvisionerName, LocalNoCloneProvisionerName, filepath.Dir(n.files.volumesDir), n.Clientset, snapshots, logger.WithName("driver"))
	if err != nil {
		_ = logFile.Close()
		return err
	}
	var stops []func()
	n.stopProvisioner = func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
		_ = logFile.Close()
	}
	stops = append(stops, runProvisioner(n.Clientset, driver, &localProvisioner{driver: driver, nodeName: n.Name}, logger))
	stopSnapshotter, err := runSnapshotter(driver, logger.WithName("snapshotter"))
	if err != nil {
		return err
	}
	stops = append(stops, stopSnapshotter)
	stopPlugins, err := startCSINodePlugins(n.files.kubeletDir, n.Name, driver)
	if err != nil {
		return err
	}
	stops = append(stops, stopPlugins)
	if err := waitFor(ctx, "the kubelet to register the CSI drivers", n.csiDriverRegistered(driver.drivers())); err != nil {
		return err
	}
	return n.runReady(ctx, "snapshot-controller", n.bins["snapshot-controller"],
		snapshotControllerArgs(n.files.adminKubeconfig, fmt.Sprintf("127.0.0.1:%d", snapshotControllerMetrics)),
		n.probeHTTP(snapshotControllerMetrics, "/metrics", false))
}

// waitUsable waits for the default ServiceAccount, which pods need.
func (n *Node) waitUsable(ctx context.Context, _ NodeOptions) error {
	return waitFor(ctx, "the default ServiceAccount", func(ctx context.Context) error {
		_, err := n.Clientset.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// nodeReady checks the node's Ready condition.
func (n *Node) nodeReady(ctx context.Context) error {
	node, err := n.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s is not Ready", n.Name)
}

// run starts a node binary from ./bin inside the node's namespace.
func (n *Node) run(ctx context.Context, name string, args []string, ready func(context.Context) bool) error {
	return n.runReady(ctx, name, n.bins[name], args, ready)
}

// runReady starts binary inside the node's namespace and waits for ready.
func (n *Node) runReady(ctx context.Context, name, binary string, args []string, ready func(context.Context) bool) error {
	p, err := StartProcess(ctx, ProcessOptions{
		Name:       name,
		Binary:     binary,
		Args:       args,
		Kubeconfig: n.files.adminKubeconfig,
		LogPath:    n.files.path(name + ".log"),
		Ready:      ready,
		Spawn:      n.network.start,
	})
	if err != nil {
		return err
	}
	n.processes = append(n.processes, p)
	return nil
}

// probeHTTP answers whether GET path on the namespace's loopback port
// returns 200 OK; TLS is not verified (a probe, not a client).
func (n *Node) probeHTTP(port int, path string, secure bool) func(context.Context) bool {
	scheme := "http"
	if secure {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, path)
	httpClient := &http.Client{Transport: &http.Transport{
		DialContext:     n.network.dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a readiness probe inside the node's namespace
	}}
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// Dial connects to an address inside the node's network namespace (a pod,
// a Service's ClusterIP, NodeAddress), as a client on the node would.
func (n *Node) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	return n.network.dial(ctx, network, address)
}

// logTails is the end of every component's log.
func (n *Node) logTails() string {
	var b strings.Builder
	for _, p := range n.processes {
		b.WriteString(p.LogTail())
		b.WriteString("\n")
	}
	return b.String()
}

// Processes are the node's running components, in start order.
func (n *Node) Processes() []*Process { return n.processes }
