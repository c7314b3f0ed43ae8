package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
)

// models the servers switch between; pods are simulated, nothing is
// downloaded.
var models = []string{"BAAI/bge-small-en-v1.5", "sentence-transformers/all-MiniLM-L6-v2"}

// writeTimeout bounds one change of a server, conflicts retried.
const writeTimeout = 30 * time.Second

// fleet is the servers of one run: a few slots of one namespace, each
// empty or holding a server, changed at random.
type fleet struct {
	namespace string
	rng       *rand.Rand
	slots     []string
	// ops counts the changes made, by kind.
	ops map[string]int
}

// newFleet returns a fleet of n empty slots.
func newFleet(namespace string, n int, rng *rand.Rand) *fleet {
	return &fleet{namespace: namespace, rng: rng, slots: make([]string, n), ops: map[string]int{}}
}

// change is one kind of change to a live server.
type change struct {
	name   string
	weight int
	apply  func(*fleet, *embedopsv1.EmbeddingServer)
}

// changes rotate the binding (class, model, mode) or grow it (replicas).
var changes = []change{
	{"storage-class", 2, func(_ *fleet, s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.StorageClassName = map[string]string{"": fastClass, fastClass: ""}[s.Spec.Cache.StorageClassName]
	}},
	{"model", 2, func(_ *fleet, s *embedopsv1.EmbeddingServer) {
		s.Spec.Model.Name = map[string]string{models[0]: models[1], models[1]: models[0]}[s.Spec.Model.Name]
	}},
	{"replicas", 2, func(f *fleet, s *embedopsv1.EmbeddingServer) {
		s.Spec.Replicas = ptr.To((s.GetReplicas() + 1 + f.rng.Int32N(2)) % 3)
	}},
	{"mode", 1, func(_ *fleet, s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.Mode = map[embedopsv1.CacheMode]embedopsv1.CacheMode{
			embedopsv1.CacheModePerReplica: embedopsv1.CacheModeShared, embedopsv1.CacheModeShared: embedopsv1.CacheModePerReplica,
		}[s.Spec.Cache.Mode]
	}},
}

// scaleUp scales a server to two replicas: more claims for its binding.
var scaleUp = change{"scale-up", 0, func(_ *fleet, s *embedopsv1.EmbeddingServer) { s.Spec.Replicas = ptr.To[int32](2) }}

// rotations are the changes that give a server a new binding.
var rotations = slices.DeleteFunc(slices.Clone(changes), func(c change) bool { return c.name == "replicas" })

// deleteWeight is the weight of deleting a live server among changes.
const deleteWeight = 2

// randomOp makes one random change: a server in an empty slot, else a
// change or a deletion of the slot's server.
func (f *fleet) randomOp(ctx context.Context) error {
	slot := f.rng.IntN(len(f.slots))
	if f.slots[slot] == "" {
		return f.create(ctx, slot)
	}
	total := deleteWeight
	for _, c := range changes {
		total += c.weight
	}
	pick := f.rng.IntN(total)
	for _, c := range changes {
		if pick -= c.weight; pick < 0 {
			return f.update(ctx, f.slots[slot], c)
		}
	}
	return f.delete(ctx, slot)
}

// create puts a random server in the slot: named after the slot, or with a
// generated suffix while a server of that name is still being deleted.
func (f *fleet) create(ctx context.Context, slot int) error {
	server := f.newServer(fmt.Sprintf("s%d", slot))
	err := cluster.Client.Create(ctx, server)
	if apierrors.IsAlreadyExists(err) {
		server = f.newServer("")
		server.GenerateName = fmt.Sprintf("s%d-", slot)
		err = cluster.Client.Create(ctx, server)
	}
	if err != nil {
		return fmt.Errorf("creating a server: %w", err)
	}
	f.slots[slot] = server.Name
	f.ops["create"]++
	return nil
}

// newServer is a random small server whose bindings retire at once.
func (f *fleet) newServer(name string) *embedopsv1.EmbeddingServer {
	mode := embedopsv1.CacheModePerReplica
	if f.rng.IntN(4) == 0 {
		mode = embedopsv1.CacheModeShared
	}
	return fixtures.EmbeddingServer(f.namespace, name,
		fixtures.WithModel(models[f.rng.IntN(len(models))], ""),
		fixtures.WithReplicas(1+f.rng.Int32N(2)),
		fixtures.WithCacheMode(mode),
		fixtures.WithStorageClass([]string{"", fastClass}[f.rng.IntN(2)]),
		fixtures.WithCacheSize("1Gi"),
		fixtures.WithRetainFor(0))
}

// update applies a change to the named server, retrying conflicts.
func (f *fleet) update(ctx context.Context, name string, c change) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, writeTimeout, true, func(ctx context.Context) (bool, error) {
		server := &embedopsv1.EmbeddingServer{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: name}, server); err != nil {
			return false, nil
		}
		c.apply(f, server)
		err := cluster.Client.Update(ctx, server)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("changing %s of server %s: %w", c.name, name, err)
	}
	f.ops[c.name]++
	return nil
}

// delete deletes the slot's server and empties the slot.
func (f *fleet) delete(ctx context.Context, slot int) error {
	server := &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: f.slots[slot]}}
	if err := client.IgnoreNotFound(cluster.Client.Delete(ctx, server)); err != nil {
		return fmt.Errorf("deleting server %s: %w", server.Name, err)
	}
	f.slots[slot] = ""
	f.ops["delete"]++
	return nil
}

// changeAll applies one random change of choices to every live server.
func (f *fleet) changeAll(ctx context.Context, choices ...change) error {
	for _, name := range f.live() {
		if err := f.update(ctx, name, choices[f.rng.IntN(len(choices))]); err != nil {
			return err
		}
	}
	return nil
}

// fill creates a server in every empty slot.
func (f *fleet) fill(ctx context.Context) error {
	for slot, name := range f.slots {
		if name == "" {
			if err := f.create(ctx, slot); err != nil {
				return err
			}
		}
	}
	return nil
}

// live names the servers in the slots.
func (f *fleet) live() []string {
	return slices.DeleteFunc(slices.Clone(f.slots), func(name string) bool { return name == "" })
}
