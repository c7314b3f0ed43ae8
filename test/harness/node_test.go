//go:build linux

package harness

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeLeavesNothingBehind runs a pod on a real node, stops the node and
// checks that the host is as it was: no mount, network namespace, link,
// cgroup, process or file of the node, and the same sysctls.
func TestNodeLeavesNothingBehind(t *testing.T) {
	if reason := NodeUnsupported(); reason != "" {
		t.Skip(reason)
	}
	g := NewWithT(t)
	ctx := t.Context()
	archive := buildPause(t)
	// Held around the node's whole life, so no other process's node
	// changes the host between the snapshots.
	g.Expect(lockNodeHost()).To(Succeed())
	defer unlockNodeHost()
	before := snapshotHost(t)

	node, err := StartNode(ctx, NodeOptions{SandboxImage: PauseImage.Ref, Images: []string{archive}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = node.Stop() })
	g.Expect(before.netns).NotTo(ContainElement(node.Name))
	runPauseToReady(ctx, g, node)
	during := snapshotHost(t)
	g.Expect(during.netns).To(ContainElement(node.Name))
	g.Expect(mountsOf(node.Dir)).NotTo(BeEmpty(), "a running pod has mounts under the node's directory")
	g.Expect(cgroupsNamed(t, node.Name)).NotTo(BeEmpty(), "the node's cgroup exists while it runs")
	g.Expect(during.sysctls).To(HaveKeyWithValue("vm/overcommit_memory", "1"), "the kubelet sets vm.overcommit_memory (protectKernelDefaults is off)")
	nodeRules, err := exec.Command("ip", "netns", "exec", node.Name, "iptables", "-t", "nat", "-S").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", nodeRules)
	g.Expect(string(nodeRules)).To(ContainSubstring("KUBE-SERVICES"), "kube-proxy's chains are in the node's namespace")

	g.Expect(node.Stop()).To(Succeed())
	after := snapshotHost(t)
	g.Expect(mountsOf(node.Dir)).To(BeEmpty())
	g.Expect(node.Dir).NotTo(BeAnExistingFile())
	g.Expect(after.netns).To(Equal(before.netns))
	g.Expect(after.links).To(Equal(before.links))
	g.Expect(after.sysctls).To(Equal(before.sysctls))
	g.Expect(after.hostPaths).To(Equal(before.hostPaths))
	g.Expect(after.iptables).To(Equal(before.iptables), "kube-proxy's and the kubelet's chains are in the node's namespace only")
	g.Expect(cgroupsNamed(t, node.Name)).To(BeEmpty())
	g.Expect(processesMentioning(node.Dir)).To(BeEmpty())
}

// runPauseToReady runs a pod of the pause image and waits for it to be
// Ready: a sandbox, a container, their mounts and network.
func runPauseToReady(ctx context.Context, g Gomega, node *Node) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: PauseImage.Ref, ImagePullPolicy: corev1.PullNever,
		}}},
	}
	_, err := node.Clientset.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		got, err := node.Clientset.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod status: %+v", got.Status)
	}).WithContext(ctx).WithTimeout(nodeStartTimeout).Should(Succeed())
}

// buildPause builds PauseImage's archive.
func buildPause(t *testing.T) string {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "pause.tar")
	if err := PauseImage.Build(t.Context(), archive); err != nil {
		t.Fatal(err)
	}
	return archive
}

// hostSnapshot is the host state a node must leave as it found it.
type hostSnapshot struct {
	netns, links []string
	// iptables are the host namespace's rules (iptables -S) per table.
	iptables  map[string]string
	sysctls   map[string]string
	hostPaths map[string]bool
}

// snapshotHost reads the network namespaces, the host's links, the
// sysctls the kubelet changes and whether the host paths exist.
func snapshotHost(t *testing.T) hostSnapshot {
	t.Helper()
	s := hostSnapshot{sysctls: map[string]string{}, hostPaths: map[string]bool{}, iptables: map[string]string{}}
	for _, table := range []string{"filter", "nat", "mangle"} {
		rules, err := exec.Command("iptables", "-t", table, "-S").CombinedOutput()
		if err != nil {
			t.Fatalf("listing the host's %s rules: %v: %s", table, err, rules)
		}
		s.iptables[table] = string(rules)
	}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		s.netns = append(s.netns, e.Name())
	}
	interfaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range interfaces {
		s.links = append(s.links, i.Name)
	}
	slices.Sort(s.links)
	state, err := recordHost()
	if err != nil {
		t.Fatal(err)
	}
	s.sysctls, s.hostPaths = state.Sysctls, state.Existed
	return s
}

// mountsOf lists the mounts at or under dir.
func mountsOf(dir string) []string {
	points, _ := mountsUnder(dir)
	return points
}

// cgroupsNamed lists cgroup directories named name in every hierarchy.
func cgroupsNamed(t *testing.T, name string) []string {
	t.Helper()
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, m := range mounts {
		_ = filepath.WalkDir(m, func(path string, entry os.DirEntry, err error) error {
			if err == nil && entry.IsDir() && entry.Name() == name {
				found = append(found, path)
			}
			return nil
		})
	}
	return found
}

// processesMentioning lists processes whose command line names dir.
func processesMentioning(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}
