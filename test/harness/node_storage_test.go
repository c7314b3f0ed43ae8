//go:build linux

package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeStorageTimeout bounds each wait on the real node: a claim binds once
// the scheduler picked the node for its pod, and a pod starts in seconds.
const nodeStorageTimeout = 3 * time.Minute

// TestNodeClonesAndSnapshots runs a real node and checks that its storage
// clones and restores as the kwok cluster's does, that the kubelet mounts
// the CSI volumes through the harness's node plugin and applies fsGroup to
// them, and that the real snapshot-controller runs inside the node.
func TestNodeClonesAndSnapshots(t *testing.T) {
	if reason := NodeUnsupported(); reason != "" {
		t.Skip(reason)
	}
	archive := buildPause(t)
	node, err := StartNode(t.Context(), NodeOptions{SandboxImage: PauseImage.Ref, Images: []string{archive}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(node.logTails())
			if data, err := os.ReadFile(filepath.Join(node.Dir, "provisioner.log")); err == nil {
				t.Log(tail(string(data), processLogTailLines))
			}
		}
		if err := node.Stop(); err != nil {
			t.Error(err)
		}
	})
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(nodeStorageTimeout)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	storage := &clusterStorage{c: node.Client, namespace: Namespace(t, node.Client)}
	// The source's pod has an fsGroup; the others none, so that the
	// kubelet leaves the copies' owners as the copy made them.
	fsGroup := int64(2000)
	var podFSGroup *int64
	storage.pod = func(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Namespace: claim.Namespace},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{FSGroup: podFSGroup},
				Containers: []corev1.Container{{
					Name: "pause", Image: PauseImage.Ref, ImagePullPolicy: corev1.PullNever,
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
				}}},
			},
		}
		g.Expect(node.Client.Create(t.Context(), pod)).To(Succeed())
	}
	podReady := func(g *WithT, name string) {
		g.Eventually(func(g Gomega) {
			pod := &corev1.Pod{}
			g.Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: storage.namespace, Name: name}, pod)).To(Succeed())
			g.Expect(pod.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod status: %+v", pod.Status)
		}).Should(Succeed())
	}

	podFSGroup = &fsGroup
	source := storage.bound(t, g, storage.claim("source", DefaultStorageClass, "64Mi", nil))
	podFSGroup = nil
	podReady(g, source.Name)
	sourceDir := storage.dir(t, g, source)
	target := filepath.Join("volumes", "kubernetes.io~csi", source.Spec.VolumeName, "mount")
	g.Expect(slices.ContainsFunc(mountsOf(node.files.kubeletDir), func(point string) bool { return strings.HasSuffix(point, target) })).
		To(BeTrue(), "the kubelet mounted the CSI volume through the node plugin")
	var stat syscall.Stat_t
	g.Expect(syscall.Stat(sourceDir, &stat)).To(Succeed())
	g.Expect(stat.Gid).To(Equal(uint32(fsGroup)), "the kubelet applied the pod's fsGroup to the CSI volume")
	g.Expect(stat.Mode & syscall.S_ISGID).NotTo(BeZero())
	want := populate(t, sourceDir)

	t.Run("a clone into another class of the driver has the files", func(t *testing.T) {
		g := NewWithT(t)
		g.SetDefaultEventuallyTimeout(nodeStorageTimeout)
		clone := storage.bound(t, g, storage.claim("clone", "fast", "64Mi", claimSource(source.Name)))
		podReady(g, clone.Name)
		g.Expect(readTree(t, storage.dir(t, g, clone))).To(Equal(want))
	})
	t.Run("a driver without clone support refuses", func(t *testing.T) {
		g := NewWithT(t)
		g.SetDefaultEventuallyTimeout(nodeStorageTimeout)
		storage.refused(t, g, storage.claim("refused", NoCloneStorageClass, "64Mi", claimSource(source.Name)),
			"CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported")
	})
	t.Run("a snapshot restores into a sized volume and is deleted with its directory", func(t *testing.T) {
		g := NewWithT(t)
		g.SetDefaultEventuallyTimeout(nodeStorageTimeout)
		snapshot := storage.snapshot(t, g, "snap", source.Name, DefaultSnapshotClass)
		content := storage.ready(t, g, snapshot)
		g.Expect(content.Spec.Driver).To(Equal(LocalProvisionerName))
		handle := *content.Status.SnapshotHandle
		g.Expect(readTree(t, handle)).To(Equal(want))

		restored := storage.bound(t, g, storage.claim("restored", SizedStorageClass, "64Mi", snapshotSource(snapshot.Name)))
		podReady(g, restored.Name)
		dir := storage.dir(t, g, restored)
		g.Expect(readTree(t, dir)).To(Equal(want))
		mounts, err := mountInfo()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mounts).To(ContainElement(mount{point: dir, fsType: "tmpfs"}), "a sized volume is a tmpfs of the claim's size")

		g.Expect(node.Client.Delete(t.Context(), snapshot)).To(Succeed())
		storage.gone(t, g, content)
		storage.gone(t, g, snapshot)
		g.Expect(handle).NotTo(BeAnExistingFile())
	})
}
