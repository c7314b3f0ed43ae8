//go:build linux

package node

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/test/harness"
)

// outOfRoomSize is the claims' size in TestARevisionThatOutgrowsTheClaimsMovesToNewStorage:
// a sized tmpfs, full at 8 MiB.
var outOfRoomSize = resource.MustParse("8Mi")

// outOfRoomRetainFor is the servers' cache.retainFor there: short enough
// to watch the old claims go when their binding retires.
const outOfRoomRetainFor = time.Minute

// changeTimeout bounds a move to new storage on 2 busy cores: a resolve
// Job for the successor, another for the new binding, then new pods one
// surge at a time, each Ready through probes every 10 s.
const changeTimeout = 15 * time.Minute

// TestARevisionThatOutgrowsTheClaimsMovesToNewStorage changes the
// revision of a two-replica PerReplica server on sized claims (a tmpfs of
// the claim's size) to a revision that does not fit beside the one they
// hold, while the room recorded from the populators says another revision
// as large as the served one does, so the change starts in place on the
// same claims (design §3, "Room for the next revision"):
//
//   - the resolve Job lists a revision larger than the claims' room: the
//     successor is marked OutOfRoom RevisionTooLarge before any pod rolls;
//   - the claims are nearly full of another program's data, written after
//     the populators reported their room: the first pod rolled finds no
//     space left (ENOSPC, reason DiskFull in its termination message) and
//     the successor is marked OutOfRoom NoSpaceLeft.
//
// Either way the server moves to new storage beside the serving
// StatefulSet, surge first, saying "no room on the old claims" in its
// Ready message and events; a watch of its pods and status shows the
// ready replicas never below replicas - maxUnavailable; the old claims
// outlive the change and are deleted by the old binding only once it
// retires, retainFor after the server left it; and the server ends Ready,
// serving the new revision's commit from its new cache.
func TestARevisionThatOutgrowsTheClaimsMovesToNewStorage(t *testing.T) {
	requireNode(t)
	t.Parallel()
	cases := []struct {
		name string
		// unitA and unitB size the weights of revisions a and b.
		unitA, unitB int
		// fill writes another program's data to each claim before the
		// change, leaving half a revision free.
		fill   bool
		reason string
	}{
		{name: "the listed revision is larger than the claims' room", unitA: 2 << 20, unitB: 6 << 20,
			reason: embedopsv1.RevisionTooLargeReason},
		{name: "the claims are nearly full of other data", unitA: 3 << 20, unitB: 3<<20 + 1, fill: true,
			reason: embedopsv1.NoSpaceLeftReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ns := harness.Namespace(t, node.Client)
			h := startHub(t, ns, "",
				hubModel{ID: smallModel, Branch: "a", Unit: tc.unitA},
				hubModel{ID: smallModel, Branch: "b", Unit: tc.unitB})
			commits := hubBranchCommits(t, ns)
			g.Expect(commits).To(HaveKey("a"))
			g.Expect(commits).To(HaveKey("b"))
			server := newServer("outgrown", h, func(s *embedopsv1.EmbeddingServer) {
				s.Spec.Replicas = new(int32(2))
				s.Spec.Model.Revision = "a"
				s.Spec.Cache.StorageClassName = harness.SizedStorageClass
				s.Spec.Cache.Size = &outOfRoomSize
				s.Spec.Cache.RetainFor = &metav1.Duration{Duration: outOfRoomRetainFor}
			})
			key := client.ObjectKeyFromObject(server)
			began := time.Now()
			applyObject(t, ns, serverObject(t, server))
			ready := waitServerReady(t, key)
			logServer(t, ready, began)
			first := roomRecorded(t, ready)
			realized := first.Status.Realized
			served := decision.RevisionSize{Bytes: *realized.Bytes, Files: len(realized.Files)}
			room := *realized.FreeBytes + *realized.ReclaimableBytes
			t.Logf("revision a: %d bytes in %d files cached; the least roomy claim reported %d bytes free, %d reclaimable",
				served.Bytes, served.Files, *realized.FreeBytes, *realized.ReclaimableBytes)
			g.Expect(decision.RevisionNeeds(served)).To(BeNumerically("<=", room),
				"the claims report room for another revision as large as a: the change starts in place")
			sets := serverStatefulSets(t, ready)
			g.Expect(sets).To(HaveLen(1))
			oldSet := sets[0]
			oldStorage := decision.StorageName(first)
			oldClaims := first.Spec.Resources.PersistentVolumeClaimNames
			g.Expect(oldClaims).To(HaveLen(2))
			if tc.fill {
				for i, claim := range oldClaims {
					free := takeRoom(t, ns, claim, fmt.Sprintf("fill-%d", i), *realized.FreeBytes-served.Bytes/2)
					g.Expect(free).To(BeNumerically("<", served.Bytes), "claim %s has no room left for a revision as large as a", claim)
				}
			}

			// The server is Ready: from here on, a watch counts its ready
			// pods, its status and its claims.
			floor := *ready.Spec.Replicas - builder.AllowedUnavailable(ready)
			g.Expect(floor).To(BeEquivalentTo(1), "the default budget: maxUnavailable 1 of 2")
			record := recordChange(t, ready, floor)
			began = time.Now()
			server.Spec.Model.Revision = "b"
			applyObject(t, ns, serverObject(t, server))
			moved := waitServing(t, key, commits["b"], first.Name)
			took := time.Since(began)
			final := bindingOf(t, moved)
			t.Logf("revision b served from new storage (binding %s) %s after the change", final.Name, took.Round(time.Second))

			// 1. The successor that took the claims over is out of room, and
			// the server moved to storage of its own.
			outOfRoom := successorOf(t, ns, first.Name)
			mark := apimeta.FindStatusCondition(outOfRoom.Status.Conditions, embedopsv1.OutOfRoomCondition)
			g.Expect(mark).NotTo(BeNil(), "binding %s is marked out of room", outOfRoom.Name)
			g.Expect(mark.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(mark.Reason).To(Equal(tc.reason))
			t.Logf("binding %s OutOfRoom %s: %s", outOfRoom.Name, mark.Reason, mark.Message)
			g.Expect(outOfRoom.Spec.Identity.Revision).To(Equal("b"))
			g.Expect(decision.StorageName(outOfRoom)).To(Equal(oldStorage), "the successor took the old claims over")
			g.Expect(final.Name).NotTo(BeElementOf(first.Name, outOfRoom.Name))
			g.Expect(final.Spec.Supersedes).To(BeEmpty(), "storage of its own")
			g.Expect(decision.StorageName(final)).NotTo(Equal(oldStorage))
			g.Expect(final.Spec.Identity.Revision).To(Equal("b"))
			sets = serverStatefulSets(t, moved)
			g.Expect(sets).To(HaveLen(1))
			g.Expect(sets[0].UID).NotTo(Equal(oldSet.UID), "a new StatefulSet on new claims")
			g.Expect(serverEvents(t, ns, "EmbeddingServer", moved.Name, tc.reason)).To(ContainElement(And(
				HaveField("Type", corev1.EventTypeWarning), HaveField("Message", ContainSubstring("the pods move to new storage instead")))))
			g.Expect(serverEvents(t, ns, "ModelCacheBinding", outOfRoom.Name, tc.reason)).To(ContainElement(
				HaveField("Message", mark.Message)))
			why := "no room on the old claims: " + mark.Message
			g.Expect(serverEvents(t, ns, "EmbeddingServer", moved.Name, embedopsv1.MovingToNewStorageReason)).To(ContainElement(
				HaveField("Message", ContainSubstring(why))))
			seen := record.snapshot()
			g.Expect(seen.readyMessages).To(ContainElement(ContainSubstring(why)), "Ready said why the pods move while they moved")
			switch tc.reason {
			case embedopsv1.NoSpaceLeftReason:
				g.Expect(seen.diskFull).NotTo(BeEmpty(), "a populate init container reported %s", populate.DiskFullReason)
				t.Logf("populators that found the claim full: %v", seen.diskFull)
			case embedopsv1.RevisionTooLargeReason:
				g.Expect(seen.podsOn[oldStorage]).To(HaveLen(int(*ready.Spec.Replicas)), "no pod rolled onto the old claims: %v", seen.podsOn[oldStorage])
				g.Expect(seen.diskFull).To(BeEmpty())
			}

			// 2. Nothing ready was taken.
			t.Logf("while it moved: least ready pods %d (%s), least status.readyReplicas %d, floor %d; seen:\n%s",
				seen.leastPods, seen.leastPodsWhen, seen.leastStatus, floor, strings.Join(seen.timeline, "\n"))
			if len(seen.violations) > 0 {
				// Not fatal: what follows still says how the change ended.
				t.Errorf("ready replicas fell below replicas - maxUnavailable = %d:\n%s", floor, strings.Join(seen.violations, "\n"))
			}
			g.Expect(seen.err).NotTo(HaveOccurred(), "the watch saw everything")

			// 4. Ready, serving b from the new cache.
			moved = waitPodsOf(t, key, int(*moved.Spec.Replicas))
			checkServedFromCache(t, moved, commits["b"], "")

			// 3. The old claims outlive the change; they go when the old
			// binding retires, retainFor after the server left it.
			for _, claim := range oldClaims {
				got, err := node.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), claim, metav1.GetOptions{})
				if err == nil {
					g.Expect(got.DeletionTimestamp).To(BeNil(), "claim %s is deleted before its binding retired: %v", claim, record.snapshot().retired)
				} else {
					// The old binding may have retired already: its
					// retainFor ran while the last pods moved.
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim %s: %v", claim, err)
				}
			}
			retired := waitReleased(t, ns, outOfRoom.Name)
			g.Expect(retired.Status.RequestReferences).To(BeEmpty())
			g.Expect(retired.Status.ReleasedAt).NotTo(BeNil())
			superseded := getModelCacheBinding(t, ns, first.Name)
			g.Expect(superseded.Status.Phase).To(Equal(embedopsv1.BindingReleased))
			g.Expect(conditions.GetReason(superseded, embedopsv1.ReadyCondition)).To(Equal(embedopsv1.SupersededReason),
				"binding %s handed its claims to %s, deleting nothing", first.Name, outOfRoom.Name)
			waitClaimsGone(t, ns, oldClaims)
			seen = record.snapshot()
			retireAfter, ok := seen.retireAfter[outOfRoom.Name]
			g.Expect(ok).To(BeTrue(), "binding %s recorded when it retires", outOfRoom.Name)
			g.Expect(retireAfter.Sub(seen.idleSince[outOfRoom.Name])).To(Equal(outOfRoomRetainFor), "retainFor after the server left it")
			for _, claim := range oldClaims {
				deleted, ok := seen.claimDeleted[claim]
				g.Expect(ok).To(BeTrue(), "claim %s was seen deleted", claim)
				g.Expect(deleted).To(BeTemporally(">=", retireAfter), "claim %s deleted once binding %s retired", claim, outOfRoom.Name)
				t.Logf("claim %s deleted at %s; binding %s retired after %s (idle since %s)", claim,
					deleted.Format(time.TimeOnly), outOfRoom.Name, retireAfter.Format(time.TimeOnly), seen.idleSince[outOfRoom.Name].Format(time.TimeOnly))
			}
			g.Expect(serverEvents(t, ns, "ModelCacheBinding", outOfRoom.Name, embedopsv1.ClaimDeletedReason)).To(HaveLen(len(oldClaims)))
			g.Expect(slices.Sorted(maps.Keys(seen.claimDeleted))).To(Equal(slices.Sorted(slices.Values(oldClaims))),
				"no claim but the old binding's was deleted")
			for _, claim := range final.Spec.Resources.PersistentVolumeClaimNames {
				got, err := node.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), claim, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.DeletionTimestamp).To(BeNil())
			}
			g.Expect(record.snapshot().err).NotTo(HaveOccurred(), "the watch saw everything")
		})
	}
}

// hubBranchCommits are the commits the namespace's hub printed, by branch
// (hubCommits keeps one per model).
func hubBranchCommits(t *testing.T, ns string) map[string]string {
	t.Helper()
	commits := map[string]string{}
	for _, c := range hubCommitLines(t, ns) {
		commits[c.Branch] = c.Commit
	}
	return commits
}

// roomRecorded is the server's binding once it recorded the room of every
// replica's claim.
func roomRecorded(t *testing.T, server *embedopsv1.EmbeddingServer) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := &embedopsv1.ModelCacheBinding{}
	NewWithT(t).Eventually(func(g Gomega) {
		key := client.ObjectKey{Namespace: server.Namespace, Name: server.Status.CacheBinding}
		g.Expect(node.Client.Get(t.Context(), key, binding)).To(Succeed())
		realized := binding.Status.Realized
		g.Expect(realized).NotTo(BeNil())
		g.Expect(realized.Bytes).NotTo(BeNil())
		g.Expect(realized.FreeBytes).NotTo(BeNil())
		g.Expect(realized.ReclaimableBytes).NotTo(BeNil())
	}).WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(time.Second).Should(Succeed())
	return binding
}

// fillFree reads podcheck fill's report.
var fillFree = regexp.MustCompile(`; (\d+) bytes free$`)

// takeRoom writes size bytes of another program's data to the claim from
// a pod of its own, as uid 1000 through fsGroup like the cache's pods,
// deletes the pod once it is done (a pod naming a claim holds it), and
// returns the room left.
func takeRoom(t *testing.T, ns, claim, name string, size int64) int64 {
	t.Helper()
	g := NewWithT(t)
	pod := serverPod(name)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.SecurityContext.FSGroup = new(int64(cacheUID))
	pod.Spec.Containers[0].Args = []string{"fill", builder.CacheMountPath + "/other-program.bin", strconv.FormatInt(size, 10)}
	pod.Spec.Containers[0].Ports = nil
	pod.Spec.Containers[0].ReadinessProbe = nil
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: builder.CacheMountPath}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}}
	pods := node.Clientset.CoreV1().Pods(ns)
	_, err := pods.Create(t.Context(), pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	done := waitForPod(t, ns, name, podFinished)
	message := terminationMessage(done)
	g.Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded), message)
	t.Logf("claim %s: %s", claim, message)
	match := fillFree.FindStringSubmatch(message)
	g.Expect(match).To(HaveLen(2), message)
	free, err := strconv.ParseInt(match[1], 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Delete(t.Context(), name, metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() bool {
		_, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(time.Second).Should(BeTrue())
	return free
}

// waitServing waits until the server's current generation is Ready with
// every replica on one StatefulSet, serving commit (its endpoint check
// read it from /info) from a binding other than old, and returns it.
func waitServing(t *testing.T, key client.ObjectKey, commit, old string) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(node.Client.Get(t.Context(), key, server)).To(Succeed())
		g.Expect(server.Status.ObservedGeneration).To(Equal(server.Generation))
		ready := conditions.Get(server, embedopsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status == metav1.ConditionTrue && ready.Reason == embedopsv1.AvailableReason).To(BeTrue(), func() string { return report(t, server) })
		g.Expect(server.Status.ReadyReplicas).To(Equal(*server.Spec.Replicas))
		g.Expect(server.Status.CacheBinding).NotTo(BeElementOf("", old))
		g.Expect(server.Status.Served).NotTo(BeNil())
		g.Expect(server.Status.Served.ModelSHA).To(Equal(commit))
		g.Expect(serverStatefulSets(t, server)).To(HaveLen(1))
	}).WithContext(t.Context()).WithTimeout(changeTimeout).WithPolling(time.Second).Should(Succeed())
	return server
}

// waitPodsOf waits until the server has exactly replicas pods (the old
// ones gone) and returns it as it is then.
func waitPodsOf(t *testing.T, key client.ObjectKey, replicas int) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := &embedopsv1.EmbeddingServer{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(node.Client.Get(t.Context(), key, server)).To(Succeed())
		g.Expect(serverPods(t, server)).To(HaveLen(replicas))
	}).WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(time.Second).Should(Succeed())
	return server
}

// successorOf is the binding that took over the named one's claims (its
// spec.supersedes).
func successorOf(t *testing.T, ns, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var bindings embedopsv1.ModelCacheBindingList
	NewWithT(t).Expect(node.Client.List(t.Context(), &bindings, client.InNamespace(ns))).To(Succeed())
	for i := range bindings.Items {
		if bindings.Items[i].Spec.Supersedes == name {
			return &bindings.Items[i]
		}
	}
	t.Fatalf("no binding of namespace %s supersedes %s", ns, name)
	return nil
}

// getModelCacheBinding reads a binding.
func getModelCacheBinding(t *testing.T, ns, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := &embedopsv1.ModelCacheBinding{}
	NewWithT(t).Expect(node.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, binding)).To(Succeed())
	return binding
}

// waitReleased waits until the binding is Released and returns it.
func waitReleased(t *testing.T, ns, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	var binding *embedopsv1.ModelCacheBinding
	NewWithT(t).Eventually(func(g Gomega) {
		binding = getModelCacheBinding(t, ns, name)
		g.Expect(binding.Status.Phase).To(Equal(embedopsv1.BindingReleased), "binding %s: %+v", name, binding.Status)
	}).WithContext(t.Context()).WithTimeout(outOfRoomRetainFor + podTimeout).WithPolling(time.Second).Should(Succeed())
	return binding
}

// waitClaimsGone waits until none of the claims exists.
func waitClaimsGone(t *testing.T, ns string, claims []string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, claim := range claims {
			_, err := node.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), claim, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim %s: %v", claim, err)
		}
	}).WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(time.Second).Should(Succeed())
}

// serverEvents are the events about the named object of kind with reason.
func serverEvents(t *testing.T, ns, kind, name, reason string) []corev1.Event {
	t.Helper()
	events, err := node.Clientset.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: fmt.Sprintf("involvedObject.kind=%s,involvedObject.name=%s,reason=%s", kind, name, reason),
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return events.Items
}

// changeRecord is what a watch of a server's namespace saw from the
// moment the server was Ready: its pods' readiness, its status, its
// bindings and the deletion of claims.
type changeRecord struct {
	mu sync.Mutex
	// floor is the fewest ready replicas allowed, from the moment the
	// record is armed (once the pods listed at the start are in).
	floor int32
	armed bool
	// serving are the pods Ready and not being deleted, by name.
	serving map[string]bool
	// leastPods is the fewest serving pods seen, leastPodsWhen which.
	leastPods     int
	leastPodsWhen string
	// leastStatus is the least status.readyReplicas seen, lastStatus the
	// last.
	leastStatus, lastStatus int32
	// readyMessages are the server's Ready messages, each once.
	readyMessages []string
	// podsOn are the pods seen on each storage (the cache-binding label),
	// by uid.
	podsOn map[string]map[types.UID]string
	// diskFull are the populate init containers seen terminated with
	// populate.DiskFullReason: pod and message.
	diskFull []string
	// claimDeleted is when each claim was deleted (its
	// deletionTimestamp), by name.
	claimDeleted map[string]time.Time
	// idleSince and retireAfter are the last each binding recorded.
	idleSince, retireAfter map[string]time.Time
	// retired are the bindings seen Retiring or Released.
	retired []string
	// violations are the moments ready replicas were below floor.
	violations []string
	// timeline lists each pod's changes of readiness and deletion, and
	// the server's of status.readyReplicas, as the watch saw them.
	timeline []string
	// states are the pods' last states in the timeline, by name.
	states map[string]string
	// err is the first watch that failed.
	err error
}

// recordChange starts watching the server's pods, the server, the
// namespace's bindings and claims until the test ends.
func recordChange(t *testing.T, server *embedopsv1.EmbeddingServer, floor int32) *changeRecord {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	ns := server.Namespace
	r := &changeRecord{
		floor: floor, serving: map[string]bool{}, leastStatus: server.Status.ReadyReplicas, lastStatus: server.Status.ReadyReplicas,
		podsOn: map[string]map[types.UID]string{}, claimDeleted: map[string]time.Time{},
		idleSince: map[string]time.Time{}, retireAfter: map[string]time.Time{}, states: map[string]string{},
	}
	core := node.Clientset.CoreV1()
	pods, err := core.Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: server.Status.Selector})
	g.Expect(err).NotTo(HaveOccurred())
	for i := range pods.Items {
		r.pod(watch.Added, &pods.Items[i])
	}
	r.leastPods, r.leastPodsWhen, r.armed = r.count(), "at the start", true
	claims, err := core.PersistentVolumeClaims(ns).List(t.Context(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var bindings embedopsv1.ModelCacheBindingList
	g.Expect(node.Client.List(t.Context(), &bindings, client.InNamespace(ns))).To(Succeed())
	for i := range bindings.Items {
		r.binding(&bindings.Items[i])
	}
	watching, err := client.NewWithWatch(node.Config, client.Options{Scheme: node.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	var wg sync.WaitGroup
	follow := func(what, from string, w func(context.Context, metav1.ListOptions) (watch.Interface, error), handle func(watch.Event)) {
		watcher, err := watchtools.NewRetryWatcherWithContext(ctx, from, &cache.ListWatch{WatchFuncWithContext: w})
		g.Expect(err).NotTo(HaveOccurred())
		wg.Go(func() {
			defer watcher.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case event, ok := <-watcher.ResultChan():
					if !ok {
						r.fail(fmt.Errorf("the watch of %s ended", what))
						return
					}
					if event.Type == watch.Error {
						r.fail(fmt.Errorf("watching %s: %w", what, apierrors.FromObject(event.Object)))
						return
					}
					handle(event)
				}
			}
		})
	}
	follow("pods", pods.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = server.Status.Selector
		return core.Pods(ns).Watch(ctx, o)
	}, func(e watch.Event) {
		if pod, ok := e.Object.(*corev1.Pod); ok {
			r.pod(e.Type, pod)
		}
	})
	follow("claims", claims.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return core.PersistentVolumeClaims(ns).Watch(ctx, o)
	}, func(e watch.Event) {
		if claim, ok := e.Object.(*corev1.PersistentVolumeClaim); ok {
			r.claim(e.Type, claim)
		}
	})
	follow("the server", server.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return watching.Watch(ctx, &embedopsv1.EmbeddingServerList{}, &client.ListOptions{
			Namespace: ns, Raw: &o, FieldSelector: fields.OneTermEqualSelector("metadata.name", server.Name),
		})
	}, func(e watch.Event) {
		if s, ok := e.Object.(*embedopsv1.EmbeddingServer); ok {
			r.server(s)
		}
	})
	follow("bindings", bindings.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return watching.Watch(ctx, &embedopsv1.ModelCacheBindingList{}, &client.ListOptions{Namespace: ns, Raw: &o})
	}, func(e watch.Event) {
		if b, ok := e.Object.(*embedopsv1.ModelCacheBinding); ok {
			r.binding(b)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return r
}

// fail records the first error.
func (r *changeRecord) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// count is how many pods serve; r.mu is held or not yet shared.
func (r *changeRecord) count() int {
	n := 0
	for _, serving := range r.serving {
		if serving {
			n++
		}
	}
	return n
}

// pod records a pod's readiness, storage and populator.
func (r *changeRecord) pod(event watch.EventType, pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	state := "deleted"
	if event == watch.Deleted {
		delete(r.serving, pod.Name)
	} else {
		r.serving[pod.Name] = podReady(pod) && pod.DeletionTimestamp == nil
		state = fmt.Sprintf("%s ready=%v deleting=%v", pod.Status.Phase, podReady(pod), pod.DeletionTimestamp != nil)
	}
	if r.states[pod.Name] != state {
		r.states[pod.Name] = state
		r.timeline = append(r.timeline, fmt.Sprintf("%s pod %s %s", time.Now().Format("15:04:05.000"), pod.Name, state))
	}
	storage := pod.Labels[embedopsv1.CacheBindingLabel]
	if r.podsOn[storage] == nil {
		r.podsOn[storage] = map[types.UID]string{}
	}
	r.podsOn[storage][pod.UID] = pod.Name
	for _, s := range pod.Status.InitContainerStatuses {
		for _, state := range []corev1.ContainerState{s.State, s.LastTerminationState} {
			if state.Terminated != nil && strings.Contains(state.Terminated.Message, `"reason":"`+populate.DiskFullReason+`"`) {
				seen := pod.Name + ": " + state.Terminated.Message
				if !slices.Contains(r.diskFull, seen) {
					r.diskFull = append(r.diskFull, seen)
				}
			}
		}
	}
	if !r.armed {
		return
	}
	n := r.count()
	if n < r.leastPods {
		r.leastPods, r.leastPodsWhen = n, fmt.Sprintf("%s %s at %s", event, pod.Name, time.Now().Format(time.TimeOnly))
	}
	if int32(n) < r.floor {
		r.violations = append(r.violations, fmt.Sprintf("%s: %d pods serve after %s %s: %v",
			time.Now().Format(time.TimeOnly), n, event, pod.Name, r.serving))
	}
}

// server records the server's ready replicas and Ready message.
func (r *changeRecord) server(server *embedopsv1.EmbeddingServer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ready := server.Status.ReadyReplicas
	if ready != r.lastStatus {
		r.lastStatus = ready
		r.timeline = append(r.timeline, fmt.Sprintf("%s server status.readyReplicas %d", time.Now().Format("15:04:05.000"), ready))
	}
	r.leastStatus = min(r.leastStatus, ready)
	if ready < r.floor {
		r.violations = append(r.violations, fmt.Sprintf("%s: status.readyReplicas %d at resourceVersion %s",
			time.Now().Format(time.TimeOnly), ready, server.ResourceVersion))
	}
	if message := conditions.GetMessage(server, embedopsv1.ReadyCondition); message != "" && !slices.Contains(r.readyMessages, message) {
		r.readyMessages = append(r.readyMessages, message)
	}
}

// binding records when a binding went idle and may retire.
func (r *changeRecord) binding(binding *embedopsv1.ModelCacheBinding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := binding.Status.IdleSince; s != nil {
		r.idleSince[binding.Name] = s.Time
	}
	if s := binding.Status.RetireAfter; s != nil {
		r.retireAfter[binding.Name] = s.Time
	}
	if p := binding.Status.Phase; (p == embedopsv1.BindingRetiring || p == embedopsv1.BindingReleased) && !slices.Contains(r.retired, binding.Name) {
		r.retired = append(r.retired, binding.Name)
	}
}

// claim records when a claim was deleted.
func (r *changeRecord) claim(event watch.EventType, claim *corev1.PersistentVolumeClaim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, seen := r.claimDeleted[claim.Name]; seen {
		return
	}
	switch {
	case claim.DeletionTimestamp != nil:
		r.claimDeleted[claim.Name] = claim.DeletionTimestamp.Time
	case event == watch.Deleted:
		r.claimDeleted[claim.Name] = time.Now()
	}
}

// changeSeen is a copy of what a changeRecord saw.
type changeSeen struct {
	leastPods              int
	leastPodsWhen          string
	leastStatus            int32
	readyMessages          []string
	podsOn                 map[string]map[types.UID]string
	diskFull               []string
	claimDeleted           map[string]time.Time
	idleSince, retireAfter map[string]time.Time
	retired, violations    []string
	timeline               []string
	err                    error
}

// snapshot copies what the record saw so far.
func (r *changeRecord) snapshot() changeSeen {
	r.mu.Lock()
	defer r.mu.Unlock()
	podsOn := map[string]map[types.UID]string{}
	for storage, pods := range r.podsOn {
		podsOn[storage] = maps.Clone(pods)
	}
	return changeSeen{
		leastPods: r.leastPods, leastPodsWhen: r.leastPodsWhen, leastStatus: r.leastStatus,
		readyMessages: slices.Clone(r.readyMessages), podsOn: podsOn, diskFull: slices.Clone(r.diskFull),
		claimDeleted: maps.Clone(r.claimDeleted), idleSince: maps.Clone(r.idleSince), retireAfter: maps.Clone(r.retireAfter),
		retired: slices.Clone(r.retired), violations: slices.Clone(r.violations), timeline: slices.Clone(r.timeline), err: r.err,
	}
}
