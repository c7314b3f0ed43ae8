package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// bindPlan is the binding a server's decision goes to: chosen by choose
// from reads alone, written by carryOut.
type bindPlan struct {
	// use is an existing binding the server may use; nil when one is
	// created.
	use *embedopsv1.ModelCacheBinding
	// create is the binding to create when use is nil, as newBinding built
	// it.
	create *embedopsv1.ModelCacheBinding
	// predecessor is the binding whose storage create takes over; nil when
	// create has storage of its own.
	predecessor *embedopsv1.ModelCacheBinding
	// firstReference is the binding the server's children use, when it
	// awaits the server's first reference (decision.AwaitsFirstReference)
	// and choose looked for a predecessor: then it is the whole plan. The
	// reference is owed whatever the new decision, and what the binding
	// is handed over to is chosen once it is written (chooseAndCarryOut).
	firstReference *embedopsv1.ModelCacheBinding
}

// choose picks the binding of the server's decision d from reads alone:
// the Active binding of d the server may use (usable) in its shard
// (decision.SameShard), the one named decision.BindingName, else a
// suffixed one of the same decision; else a new one under the next free
// suffix, which takes over the storage of the binding the server uses when
// decision.Takeover lets it (predecessor). A Retiring or Released binding
// is never revived. A shard's cache holds only its own bindings, so in a
// shard a new name is chosen from an uncached list, which also counts the
// names other shards took.
func (r *reads) choose(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, source SourceFunc, options bindOptions) (bindPlan, error) {
	base := decision.BindingName(d)
	named := &embedopsv1.ModelCacheBinding{}
	err := r.cache.Get(ctx, types.NamespacedName{Namespace: server.Namespace, Name: base}, named)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return bindPlan{}, fmt.Errorf("reading binding %s: %w", base, err)
	case err == nil:
		usable, err := r.usable(ctx, server, named, d)
		if err != nil || usable {
			return bindPlan{use: named}, err
		}
	}
	use, taken, err := r.pickListed(ctx, r.cache, server, base, d)
	if err != nil || use != nil {
		return bindPlan{use: use}, err
	}
	if !r.selector.Empty() {
		// A steady server of this shard found its binding in the cache; a
		// new name must not be one another shard took.
		if use, taken, err = r.pickListed(ctx, r.live, server, base, d); err != nil || use != nil {
			return bindPlan{use: use}, err
		}
	}
	name, err := nextBindingName(base, named.Name != "", taken)
	if err != nil {
		return bindPlan{}, err
	}
	predecessor, firstReference, err := r.predecessor(ctx, server, d)
	if err != nil || firstReference != nil {
		return bindPlan{firstReference: firstReference}, err
	}
	if predecessor != nil && predecessor.Name == name {
		return bindPlan{}, fmt.Errorf("binding %s cannot supersede itself", name)
	}
	create, err := r.newBinding(ctx, server, d, name, source, predecessor, options)
	if err != nil {
		return bindPlan{}, err
	}
	return bindPlan{create: create, predecessor: predecessor}, nil
}

// nextBindingName is the name of a new binding of base: suffix 1 when no
// binding has the base name, else 2, and always past the highest suffix
// taken.
func nextBindingName(base string, baseTaken bool, taken int) (string, error) {
	next := 1
	if baseTaken {
		next = 2
	}
	next = max(next, taken+1)
	if next > decision.MaxBindingSuffix {
		return "", fmt.Errorf("binding %s has more than %d retired successors", base, decision.MaxBindingSuffix)
	}
	return decision.BindingNameAt(base, next), nil
}

// pickListed lists the bindings of base with reader and picks one (pick).
func (r *reads) pickListed(ctx context.Context, reader client.Reader, server *embedopsv1.EmbeddingServer, base string, d *decision.Decision) (*embedopsv1.ModelCacheBinding, int, error) {
	var bindings embedopsv1.ModelCacheBindingList
	if err := reader.List(ctx, &bindings, client.InNamespace(server.Namespace), client.MatchingLabels{embedopsv1.BindingBaseLabel: base}); err != nil {
		return nil, 0, fmt.Errorf("listing the bindings of %s: %w", base, err)
	}
	return r.pick(ctx, server, bindings.Items, base, d)
}

// pick returns the first suffixed binding of base, in suffix order, that
// the server may use (usable), and the highest suffix taken before it.
func (r *reads) pick(ctx context.Context, server *embedopsv1.EmbeddingServer, bindings []embedopsv1.ModelCacheBinding, base string, d *decision.Decision) (*embedopsv1.ModelCacheBinding, int, error) {
	slices.SortFunc(bindings, func(a, b embedopsv1.ModelCacheBinding) int {
		return decision.BindingSuffix(base, a.Name) - decision.BindingSuffix(base, b.Name)
	})
	taken := 0
	for i := range bindings {
		n := decision.BindingSuffix(base, bindings[i].Name)
		if n == 0 {
			continue
		}
		usable, err := r.usable(ctx, server, &bindings[i], d)
		if err != nil || usable {
			return &bindings[i], n, err
		}
		taken = max(taken, n)
	}
	return nil, taken, nil
}

// usable reports whether the server may use binding for d
// (decision.Usable) in its own shard (decision.SameShard), and, for a
// PerReplica binding it does not reference yet (a reverted decision),
// whether the StatefulSet that makes its claims is free for it: a
// StatefulSet of that name serving other storage cannot take its claim
// templates in place, so reusing the binding would replace the serving
// pods. Such a binding is passed over and the decision gets new storage,
// which rolls. Read uncached, as placeBesideServing.
func (r *reads) usable(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, d *decision.Decision) (bool, error) {
	if !decision.Usable(binding, d, server.UID) || !decision.SameShard(binding.Labels, server.Labels, r.shardKeys) {
		return false, nil
	}
	if binding.Spec.Decision.Mode != embedopsv1.CacheModePerReplica || decision.HasReference(binding, server.UID) ||
		decision.AwaitsFirstReference(binding, server.UID) {
		// Its StatefulSet is the server's: it made it for this binding.
		return true, nil
	}
	sts, err := r.statefulSet(ctx, types.NamespacedName{Namespace: server.Namespace, Name: decision.StatefulSetNameFor(binding, server.Name)})
	if err != nil || sts == nil {
		return err == nil, err
	}
	return sts.Spec.Template.Labels[embedopsv1.CacheBindingLabel] == decision.StorageName(binding), nil
}

// newBinding builds the binding that records d under name: its source,
// the StorageClass's cluster facts and the server's shard labels, and
// predecessor's storage when it is not nil, else storage of its own,
// placed beside a serving StatefulSet when one exists
// (placeBesideServing).
func (r *reads) newBinding(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, name string, source SourceFunc, predecessor *embedopsv1.ModelCacheBinding, options bindOptions) (*embedopsv1.ModelCacheBinding, error) {
	recordedSource, err := source(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolving the source of the cache decision: %w", err)
	}
	recorded := r.withClusterFacts(ctx, d)
	binding := builder.Binding(server, recorded, name, recordedSource)
	if predecessor != nil {
		binding = builder.SuccessorBinding(server, recorded, name, recordedSource, predecessor)
	} else if err := r.placeBesideServing(ctx, server, binding, options); err != nil {
		return nil, err
	}
	maps.Copy(binding.Labels, decision.ShardLabels(server.Labels, r.shardKeys))
	return binding, nil
}

// withClusterFacts adds the StorageClass's provisioner and parameters to
// d, when it is readable. An existing claim's decision gets none: the
// claim is its user's, and no StorageClass was decided.
func (r *reads) withClusterFacts(ctx context.Context, d *decision.Decision) *decision.Decision {
	if d.Decision.ExistingClaim != "" {
		return d
	}
	class, err := storageClassOf(ctx, r.cache, d.Decision.StorageClassName)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("recording no cluster facts: the StorageClass is not readable", "error", err.Error())
		return d
	}
	if class == nil {
		return d
	}
	return decision.WithClusterFacts(d, class.Provisioner, class.Parameters)
}

// placeBesideServing gives a new PerReplica binding a StatefulSet of its
// own (decision.RolloutStatefulSetName) when one under the server's name
// exists: that one serves another storage, and its claim templates cannot
// change (k8s pkg/apis/apps/validation, "updates to statefulset spec for
// fields other than ... are forbidden"), so the new pods start beside its
// pods instead of replacing them. Read uncached: a binding is created
// rarely, and a StatefulSet created a moment ago must be seen; unless the
// caller read so a moment ago (StatefulSetAbsent).
func (r *reads) placeBesideServing(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, options bindOptions) error {
	if binding.Spec.Decision.Mode != embedopsv1.CacheModePerReplica || binding.Spec.Decision.ExistingClaim != "" || options.statefulSetAbsent {
		return nil
	}
	serving, err := r.statefulSet(ctx, client.ObjectKeyFromObject(server))
	if err != nil || serving == nil {
		return err
	}
	name, err := r.freeRolloutName(ctx, server, decision.StorageName(binding))
	if err != nil {
		return err
	}
	builder.BesideStatefulSet(binding, server, name)
	return nil
}

// freeRolloutName is the first of the storage's rollout StatefulSet names
// (decision.RolloutStatefulSetNames) that no other object holds: read
// uncached, since another server's StatefulSet (a server may be named
// <server>-<6 hex>) is not this server's to see in the cache, and applying
// onto it would fail on its controller reference at every reconcile. A
// StatefulSet with this server's owner labels is one an earlier try made.
func (r *reads) freeRolloutName(ctx context.Context, server *embedopsv1.EmbeddingServer, storage string) (string, error) {
	return decision.FreeRolloutName(server.Name, storage, func(name string) (bool, error) {
		existing, err := r.statefulSet(ctx, types.NamespacedName{Namespace: server.Namespace, Name: name})
		return existing == nil || (existing.Labels[embedopsv1.NameLabel] == server.Name && existing.Labels[embedopsv1.NamespaceLabel] == server.Namespace), err
	})
}
