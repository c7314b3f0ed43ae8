//go:build linux

package node

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/harness"
)

// cacheUID is the user, group and fsGroup of TEI pods (internal/builder
// runAsID).
const cacheUID = 1000

// TestNewPodServesFromCacheWithoutTheHub stops the hub once a PerReplica
// cache is filled and deletes the pod: the StatefulSet's new pod finds its
// claim populated (the populate init container checks the snapshot by the
// sizes it recorded, without the hub) and TEI serves /embed from it.
func TestNewPodServesFromCacheWithoutTheHub(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h, server, old := readyServerWithOnePod(t, ns, "offline")

	h.stop(t)
	g.Expect(node.Client.Delete(t.Context(), &old[0])).To(Succeed())
	began := time.Now()
	pod := waitForNewPod(t, ns, old[0].Name, old[0].UID)
	t.Logf("pod %s Ready %s after the old one was deleted, the hub stopped", pod.Name, time.Since(began).Round(time.Millisecond))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	commit := h.commits[smallModel]
	checkServedFromCache(t, got, commit, "")
	g.Expect(podTEI(pod, got.Spec.Port, "").embed(t, "served from the cache")).To(HaveLen(1))
}

// readyServerWithOnePod starts a hub of smallModel in ns and a server
// named name on it, waits until the server is Ready, and returns the hub,
// the server as applied, and its one pod.
func readyServerWithOnePod(t *testing.T, ns, name string, modify ...func(*embedopsv1.EmbeddingServer)) (*hub, *embedopsv1.EmbeddingServer, []corev1.Pod) {
	t.Helper()
	h := startHub(t, ns, "", hubModel{ID: smallModel})
	server := newServer(name, h, modify...)
	began := time.Now()
	applyObject(t, ns, serverObject(t, server))
	got := waitServerReady(t, client.ObjectKeyFromObject(server))
	logServer(t, got, began)
	pods := serverPods(t, got)
	NewWithT(t).Expect(pods).To(HaveLen(1))
	return h, server, pods
}

// waitForNewPod waits until the pod name exists under another uid than
// old and is Ready.
func waitForNewPod(t *testing.T, ns, name string, old types.UID) *corev1.Pod {
	t.Helper()
	return waitForPod(t, ns, name, func(pod *corev1.Pod) bool { return pod.UID != old && podReady(pod) })
}

// TestPerReplicaCacheIsWrittenByUID1000ThroughFSGroup checks, from a pod
// mounting a server's PerReplica claim, that the populator running as uid
// 1000 wrote every file of the cache, into a volume the provisioner made
// root-owned and private (0700) and the kubelet handed to the pods'
// fsGroup: the volume's root is group 1000 with setgid, as the kubelet's
// SetVolumeOwnership leaves it (pkg/volume/volume_linux.go).
func TestPerReplicaCacheIsWrittenByUID1000ThroughFSGroup(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	_, _, pods := readyServerWithOnePod(t, ns, "owned")
	security := pods[0].Spec.SecurityContext
	g.Expect(*security.RunAsUser).To(BeEquivalentTo(cacheUID))
	g.Expect(*security.FSGroup).To(BeEquivalentTo(cacheUID))
	claims := claimsOf(&pods[0])
	g.Expect(claims).To(HaveLen(1))

	owners := cacheOwners(t, ns, claims[0])
	g.Expect(owners.GID).To(BeEquivalentTo(cacheUID), "the kubelet gave the volume to the fsGroup")
	g.Expect(owners.Mode).To(MatchRegexp(`^2[0-7]7[0-7]$`), "setgid, group rwx")
	g.Expect(owners.Below).To(HaveKey("1000:1000"))
	g.Expect(owners.Below).To(HaveLen(1), "every cache entry is uid 1000's, group 1000")
}

// ownership is podcheck's owners report (test/node/podcheck/owners.go).
type ownership struct {
	UID, GID uint32
	Mode     string
	Below    map[string]int
}

// cacheOwners runs `podcheck owners` in a pod mounting the claim read-only
// as uid 1000 without an fsGroup, so the kubelet changes nothing.
func cacheOwners(t *testing.T, ns, claim string) ownership {
	t.Helper()
	pod := checkPod("owners", "")
	pod.Spec.Containers[0].Args = []string{"owners", builder.CacheMountPath}
	pod.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true},
	}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: builder.CacheMountPath, ReadOnly: true}}
	_, err := node.Clientset.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	done := waitForPod(t, ns, pod.Name, podFinished)
	message := terminationMessage(done)
	NewWithT(t).Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded), message)
	var owners ownership
	NewWithT(t).Expect(json.Unmarshal([]byte(message), &owners)).To(Succeed(), message)
	t.Logf("cache %s as a pod sees it: %s", claim, message)
	return owners
}

// TestSharedCacheIsFilledOnceAndReadByTwoServers runs two servers of one
// model with a Shared cache in one namespace: they share one binding and
// claim (DESIGN §4's sharing identity), its one Job filled it at its first
// attempt, and both servers' pods, which have no populate init container,
// serve the commit from it.
func TestSharedCacheIsFilledOnceAndReadByTwoServers(t *testing.T) {
	requireNode(t)
	t.Parallel()
	g := NewWithT(t)
	ns := harness.Namespace(t, node.Client)
	h := startHub(t, ns, "", hubModel{ID: smallModel})
	shared := func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Mode = embedopsv1.CacheModeShared }
	var servers []*embedopsv1.EmbeddingServer
	began := time.Now()
	for _, name := range []string{"reader-a", "reader-b"} {
		server := newServer(name, h, shared)
		applyObject(t, ns, serverObject(t, server))
		servers = append(servers, server)
	}
	for i, server := range servers {
		servers[i] = waitServerReady(t, client.ObjectKeyFromObject(server))
		logServer(t, servers[i], began)
		checkServedFromCache(t, servers[i], h.commits[smallModel], "")
	}
	g.Expect(servers[1].Status.CacheBinding).To(Equal(servers[0].Status.CacheBinding), "one binding for both")
	jobs := &batchv1.JobList{}
	g.Expect(node.Client.List(t.Context(), jobs, client.InNamespace(ns))).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "one populate Job")
}
