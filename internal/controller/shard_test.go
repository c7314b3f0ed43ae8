package controller

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/watch"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// The selectors of Flux's sharding documentation: one controller per shard,
// and a default controller for everything no shard claims.
const (
	shard1Selector  = embedopsv1.ShardLabel + "=shard1"
	shard2Selector  = embedopsv1.ShardLabel + "=shard2"
	defaultSelector = "!" + embedopsv1.ShardLabel
)

// startShard starts a manager for the namespace with
// --watch-label-selector=selector ("" for none).
func startShard(t *testing.T, namespace, selector string) *writeCounter {
	t.Helper()
	return startManager(t, namespace, func(o *ManagerOptions) { o.Watch.LabelSelector = selector })
}

// inShard labels a fixture server with Flux's sharding key.
func inShard(shard string) fixtures.Option {
	return fixtures.WithLabels(map[string]string{embedopsv1.ShardLabel: shard})
}

// namesWritten returns the names of the objects of resource (plural, e.g.
// "modelcachebindings") that writes changed; a create names no object.
func namesWritten(writes []string, resource string) []string {
	var names []string
	for _, write := range writes {
		parts := strings.Split(strings.Trim(strings.SplitN(write, " ", 2)[1], "/"), "/")
		if i := slices.Index(parts, resource); i >= 0 && i+1 < len(parts) {
			names = append(names, parts[i+1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// finishMove plays the StatefulSet controller for a moved server: the
// StatefulSet of its new binding becomes ready, so the storage change rolls
// out and the old StatefulSet, which makes the old binding's claims, goes.
// expectReleasedByItsOldShard completes a moved server's storage change
// and checks that its old binding is Released, and that each shard wrote
// only its own binding: oldShard the old one, newShard the new.
func expectReleasedByItsOldShard(t *testing.T, g *WithT, key types.NamespacedName, old, moving *embedopsv1.ModelCacheBinding, oldShard, newShard *writeCounter) {
	t.Helper()
	finishMove(t, g, key, moving)
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, key.Namespace, old.Name).Status.Phase).To(Equal(embedopsv1.BindingReleased))
	}).Should(Succeed())
	g.Expect(namesWritten(newShard.writePaths(), "modelcachebindings")).To(ConsistOf(moving.Name))
	g.Expect(namesWritten(oldShard.writePaths(), "modelcachebindings")).To(ConsistOf(old.Name))
}

func finishMove(t *testing.T, g *WithT, key types.NamespacedName, binding *embedopsv1.ModelCacheBinding) {
	t.Helper()
	next := types.NamespacedName{Namespace: key.Namespace, Name: decision.StatefulSetNameFor(binding, key.Name)}
	g.Eventually(func() error { return env.Client.Get(t.Context(), next, &appsv1.StatefulSet{}) }).Should(Succeed())
	markStatefulSetReady(t, g, next)
	if next != key {
		expectDrainedTo(t, g, key.Namespace, next.Name)
	}
}

func TestShardReconcilesOnlyItsServers(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	shard1 := startShard(t, namespace, shard1Selector)
	defaults := startShard(t, namespace, defaultSelector)

	// The server no running shard selects is created first: when the others
	// are done, both caches have long held it, had they selected it.
	orphan := createServer(t, g, fixtures.EmbeddingServer(namespace, "orphan", inShard("shard2")))
	mine := createServer(t, g, fixtures.EmbeddingServer(namespace, "mine", inShard("shard1")))
	plain := createServer(t, g, fixtures.EmbeddingServer(namespace, "plain"))

	binding := waitForBinding(t, g, mine, "")
	g.Expect(binding.Labels).To(HaveKeyWithValue(embedopsv1.ShardLabel, "shard1"), "a binding follows the server it serves")
	plainBinding := waitForBinding(t, g, plain, "")
	g.Expect(plainBinding.Labels).NotTo(HaveKey(embedopsv1.ShardLabel))

	g.Consistently(func(g Gomega) {
		server := getServer(t, g, orphan)
		g.Expect(server.Finalizers).To(BeEmpty())
		g.Expect(server.StatusWritten()).To(BeFalse())
		g.Expect(env.Client.Get(t.Context(), orphan, &appsv1.StatefulSet{})).NotTo(Succeed())
	}).Should(Succeed())

	for name, writes := range map[string]*writeCounter{"shard1": shard1, "default": defaults} {
		paths := writes.writePaths()
		g.Expect(namesWritten(paths, "embeddingservers")).NotTo(ContainElement("orphan"), "%s wrote another shard's server", name)
		g.Expect(namesWritten(paths, "statefulsets")).NotTo(ContainElement("orphan"), "%s wrote another shard's children", name)
	}
	g.Expect(namesWritten(shard1.writePaths(), "embeddingservers")).To(ConsistOf("mine"))
	g.Expect(namesWritten(shard1.writePaths(), "modelcachebindings")).To(ConsistOf(binding.Name))
	g.Expect(namesWritten(defaults.writePaths(), "embeddingservers")).To(ConsistOf("plain"))
	g.Expect(namesWritten(defaults.writePaths(), "modelcachebindings")).To(ConsistOf(plainBinding.Name))
}

func TestUnshardedControllerKeepsEveryServer(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	labelled := createServer(t, g, fixtures.EmbeddingServer(namespace, "labelled", inShard("shard1")))
	plain := createServer(t, g, fixtures.EmbeddingServer(namespace, "plain"))

	// Without --watch-label-selector nothing is ignored; the binding still
	// copies the key, so a shard started later finds it in its cache.
	g.Expect(waitForBinding(t, g, labelled, "").Labels).To(HaveKeyWithValue(embedopsv1.ShardLabel, "shard1"))
	g.Expect(waitForBinding(t, g, plain, "").Labels).NotTo(HaveKey(embedopsv1.ShardLabel))
}

func TestShardsDoNotShareABindingOfTheSameDecision(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	shard1 := startShard(t, namespace, shard1Selector)
	shard2 := startShard(t, namespace, shard2Selector)
	shared := fixtures.WithCacheMode(embedopsv1.CacheModeShared)
	a := createServer(t, g, fixtures.EmbeddingServer(namespace, "a", shared, inShard("shard1")))
	b := createServer(t, g, fixtures.EmbeddingServer(namespace, "b", shared, inShard("shard2")))

	// a and b decide the same Shared cache, whose binding name is one. b does
	// not adopt a's binding: b's controller does not hold it in its cache and
	// decision.SameShard refuses it when read uncached. Instead b's shard
	// creates the next suffix of the same name, labelled with its own shard,
	// with its own claim and populate Job: a Shared cache is shared within a
	// shard, and each shard downloads the model once.
	ba, bb := waitForBinding(t, g, a, ""), waitForBinding(t, g, b, "")
	g.Expect(bb.Name).NotTo(Equal(ba.Name))
	g.Expect(bb.Spec.Decision.Digest).To(Equal(ba.Spec.Decision.Digest), "the decisions match")
	g.Expect(ba.Labels).To(HaveKeyWithValue(embedopsv1.ShardLabel, "shard1"))
	g.Expect(bb.Labels).To(HaveKeyWithValue(embedopsv1.ShardLabel, "shard2"))
	g.Expect(ba.Labels[embedopsv1.BindingBaseLabel]).To(Equal(bb.Labels[embedopsv1.BindingBaseLabel]))

	// Within a shard the cache is shared as before.
	c := createServer(t, g, fixtures.EmbeddingServer(namespace, "c", shared, inShard("shard1")))
	g.Expect(waitForBinding(t, g, c, "").Name).To(Equal(ba.Name))
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, ba.Name).Status.RequestReferences).To(ConsistOf(HaveField("Name", "a"), HaveField("Name", "c")))
		g.Expect(getBinding(t, g, namespace, bb.Name).Status.RequestReferences).To(ConsistOf(HaveField("Name", "b")))
	}).Should(Succeed())

	g.Expect(namesWritten(shard1.writePaths(), "modelcachebindings")).To(ConsistOf(ba.Name))
	g.Expect(namesWritten(shard2.writePaths(), "modelcachebindings")).To(ConsistOf(bb.Name))
	g.Expect(namesWritten(shard1.writePaths(), "embeddingservers")).To(ConsistOf("a", "c"))
	g.Expect(namesWritten(shard2.writePaths(), "embeddingservers")).To(ConsistOf("b"))
}

func TestServerMovedToAnotherShardLeavesItsOldBinding(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	shard2 := startShard(t, namespace, shard2Selector)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "moving", inShard("shard1"), fixtures.WithRetainFor(0)))
	var old *embedopsv1.ModelCacheBinding
	t.Run("shard1 runs", func(t *testing.T) {
		startShard(t, namespace, shard1Selector)
		old = waitForBinding(t, newG(t), key, "")
	})

	// While shard1 is down the server moves to shard2, which gives it a
	// binding of its own and leaves the old one alone, although the old one
	// still references the server: only shard1 writes shard1's bindings.
	updateServer(t, g, key, inShard("shard2"))
	moving := waitForBinding(t, g, key, old.Name)
	g.Expect(moving.Labels).To(HaveKeyWithValue(embedopsv1.ShardLabel, "shard2"))
	g.Expect(getBinding(t, g, namespace, old.Name).Status.RequestReferences).To(ConsistOf(HaveField("Name", "moving")))

	// shard1 comes back: its binding controller finds the reference of a
	// server that is now in another shard and drops it, so the old binding
	// goes idle and, past retainFor (0s here), releases its claims once the
	// storage change has rolled out and no StatefulSet makes them.
	shard1 := startShard(t, namespace, shard1Selector)
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, old.Name).Status.RequestReferences).To(BeEmpty())
	}).Should(Succeed())
	expectReleasedByItsOldShard(t, g, key, old, moving, shard1, shard2)
	g.Expect(namesWritten(shard1.writePaths(), "embeddingservers")).To(BeEmpty(), "the server is no longer shard1's")
	uid := getServer(t, g, key).UID
	var bindings embedopsv1.ModelCacheBindingList
	g.Expect(env.Client.List(t.Context(), &bindings, client.InNamespace(namespace))).To(Succeed())
	for i := range bindings.Items {
		if decision.HasReference(&bindings.Items[i], uid) {
			g.Expect(bindings.Items[i].Name).To(Equal(moving.Name))
		}
	}
}

func TestServerMovedWhileBothShardsRunIsReleasedByItsOldShard(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	shard1 := startShard(t, namespace, shard1Selector)
	shard2 := startShard(t, namespace, shard2Selector)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "moving", inShard("shard1"), fixtures.WithRetainFor(0)))
	old := waitForBinding(t, g, key, "")

	// shard1's informer reports the relabelled server as deleted, which
	// wakes the binding controller of shard1 (bindingsOfServer).
	updateServer(t, g, key, inShard("shard2"))
	moving := waitForBinding(t, g, key, old.Name)
	g.Eventually(func(g Gomega) {
		g.Expect(getBinding(t, g, namespace, old.Name).Status.RequestReferences).To(BeEmpty())
	}).Should(Succeed())
	expectReleasedByItsOldShard(t, g, key, old, moving, shard1, shard2)
}

func TestWatchSelectorShapesTheShard(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector string
		keys     []string
		lease    string
		servers  bool // servers and bindings get a selector of their own
	}{
		{name: "unsharded", selector: "", keys: []string{embedopsv1.ShardLabel}, lease: watch.LeaderElectionID},
		{name: "shard", selector: shard1Selector, keys: []string{embedopsv1.ShardLabel},
			lease: leaderelection.GenerateID(watch.LeaderElectionID, shard1Selector), servers: true},
		{name: "default controller", selector: defaultSelector, keys: []string{embedopsv1.ShardLabel},
			lease: leaderelection.GenerateID(watch.LeaderElectionID, defaultSelector), servers: true},
		{name: "more keys", selector: shard1Selector + ",team=search", keys: []string{embedopsv1.ShardLabel, "team"},
			lease: leaderelection.GenerateID(watch.LeaderElectionID, shard1Selector+",team=search"), servers: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := runtimectrl.WatchOptions{LabelSelector: tc.selector}
			selector, err := watch.Selector(opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(watch.ShardKeys(selector)).To(Equal(tc.keys))
			g.Expect(watch.ShardLeaderElectionID(opts)).To(Equal(tc.lease))
			byObject := watch.CacheOptions(selector).ByObject
			for _, obj := range []client.Object{&embedopsv1.EmbeddingServer{}, &embedopsv1.ModelCacheBinding{}} {
				found := false
				for key, options := range byObject {
					if reflect.TypeOf(key) == reflect.TypeOf(obj) {
						found = true
						g.Expect(options.Label.String()).To(Equal(selector.String()))
					}
				}
				g.Expect(found).To(Equal(tc.servers), "%T", obj)
			}
		})
	}
	_, err := watch.Selector(runtimectrl.WatchOptions{LabelSelector: "a=b=c"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("--watch-label-selector")))
}
