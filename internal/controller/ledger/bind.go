package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// SourceFunc resolves the provenance of a decision; Bind calls it only when
// it creates a binding, since a binding's source is immutable.
type SourceFunc func(ctx context.Context) (embedopsv1.DecisionSource, error)

// Bound is what Bind did.
type Bound struct {
	// Binding is the Active binding the server references now, or whose
	// first reference waits for its claims (ReferenceWait); nil when
	// ServerGone.
	Binding *embedopsv1.ModelCacheBinding
	// Created is true when Bind created Binding.
	Created bool
	// ServerGone is true when the server is gone or being deleted: nothing
	// was referenced, and the reconcile has nothing left to do.
	ServerGone bool
	// ReferenceWait is how much longer the server's first reference of the
	// binding it created waits for the claims to bind (firstReferenceWait);
	// the server looks again by then at the latest. Zero when referenced.
	ReferenceWait time.Duration
}

// BindOption changes how Bind references a binding.
type BindOption func(*bindOptions)

type bindOptions struct {
	serverLive        bool
	statefulSetAbsent bool
}

// ServerReadLive tells Bind that the server is the API server's answer to
// a write the caller just made: it is as live as an uncached read, so the
// reference needs none (confirmLive).
func ServerReadLive() BindOption {
	return func(o *bindOptions) { o.serverLive = true }
}

// StatefulSetAbsent tells Bind that the caller read, uncached and a moment
// ago, that no StatefulSet has the server's name: a new binding needs no
// read of its own to place its StatefulSet (placeBesideServing).
func StatefulSetAbsent() BindOption {
	return func(o *bindOptions) { o.statefulSetAbsent = true }
}

// Bind finds or creates the Active binding of the server's decision d,
// references it and adds the claims of the server's current replicas.
func (l *Ledger) Bind(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, source SourceFunc, opts ...BindOption) (Bound, error) {
	var options bindOptions
	for _, opt := range opts {
		opt(&options)
	}
	binding, created, err := l.find(ctx, server, d, source, options)
	if err != nil {
		return Bound{}, err
	}
	if !created && l.written.Behind(client.ObjectKeyFromObject(binding), binding.ResourceVersion) {
		// The cache has not seen this process's last write: the reference
		// or claims it added would be added again, a Conflict.
		if err := l.apiReader.Get(ctx, client.ObjectKeyFromObject(binding), binding); err != nil {
			return Bound{}, fmt.Errorf("reading binding %s: %w", binding.Name, err)
		}
	}
	wait, err := l.reference(ctx, server, binding, options.serverLive, true)
	if err != nil {
		if errors.Is(err, errServerGone) {
			return Bound{ServerGone: true}, nil
		}
		return Bound{}, err
	}
	if err := l.addClaims(ctx, binding, decision.ClaimNamesFor(binding, server.Name, server.GetReplicas())); err != nil {
		return Bound{}, err
	}
	if err := l.inheritRealized(ctx, binding); err != nil {
		return Bound{}, err
	}
	return Bound{Binding: binding, Created: created, ReferenceWait: wait}, nil
}

// find returns the Active binding of the decision the server may use
// (usable) in the server's shard (decision.SameShard): the one named
// decision.BindingName, else a suffixed one of the same decision, else a
// new one under the next free suffix, which succeeds the binding the
// server uses when the decision changed in retainFor alone (see succeed). A
// Retiring or Released binding is never revived. A shard's cache holds only
// its own bindings, so in a shard a new name is chosen from an uncached
// list, which also counts the names other shards took.
func (l *Ledger) find(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, source SourceFunc, options bindOptions) (*embedopsv1.ModelCacheBinding, bool, error) {
	base := decision.BindingName(d)
	binding := &embedopsv1.ModelCacheBinding{}
	err := l.client.Get(ctx, types.NamespacedName{Namespace: server.Namespace, Name: base}, binding)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("reading binding %s: %w", base, err)
	case err == nil:
		usable, err := l.usable(ctx, server, binding, d)
		if err != nil || usable {
			return binding, false, err
		}
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := l.client.List(ctx, &bindings, client.InNamespace(server.Namespace), client.MatchingLabels{embedopsv1.BindingBaseLabel: base}); err != nil {
		return nil, false, fmt.Errorf("listing the bindings of %s: %w", base, err)
	}
	usable, taken, err := l.pick(ctx, server, bindings.Items, base, d)
	if err != nil || usable != nil {
		return usable, false, err
	}
	if !l.selector.Empty() {
		// A steady server of this shard found its binding in the cache; a
		// new name must not be one another shard took.
		var all embedopsv1.ModelCacheBindingList
		if err := l.apiReader.List(ctx, &all, client.InNamespace(server.Namespace), client.MatchingLabels{embedopsv1.BindingBaseLabel: base}); err != nil {
			return nil, false, fmt.Errorf("listing the bindings of %s: %w", base, err)
		}
		if usable, taken, err = l.pick(ctx, server, all.Items, base, d); err != nil || usable != nil {
			return usable, false, err
		}
	}
	next := 1
	if binding.Name != "" {
		next = 2
	}
	next = max(next, taken+1)
	if next > decision.MaxBindingSuffix {
		return nil, false, fmt.Errorf("binding %s has more than %d retired successors", base, decision.MaxBindingSuffix)
	}
	name := decision.BindingNameAt(base, next)
	predecessor, err := l.predecessor(ctx, server, d)
	if err != nil {
		return nil, false, err
	}
	if predecessor != nil {
		return l.succeed(ctx, server, d, name, source, predecessor)
	}
	return l.create(ctx, server, d, name, source, nil, options)
}

// pick returns the first suffixed binding of base, in suffix order, that
// the server may use (usable), and the highest suffix taken before it.
func (l *Ledger) pick(ctx context.Context, server *embedopsv1.EmbeddingServer, bindings []embedopsv1.ModelCacheBinding, base string, d *decision.Decision) (*embedopsv1.ModelCacheBinding, int, error) {
	slices.SortFunc(bindings, func(a, b embedopsv1.ModelCacheBinding) int {
		return decision.BindingSuffix(base, a.Name) - decision.BindingSuffix(base, b.Name)
	})
	taken := 0
	for i := range bindings {
		n := decision.BindingSuffix(base, bindings[i].Name)
		if n == 0 {
			continue
		}
		usable, err := l.usable(ctx, server, &bindings[i], d)
		if err != nil || usable {
			return &bindings[i], n, err
		}
		taken = max(taken, n)
	}
	return nil, taken, nil
}

// create records the decision under name, with its source and the
// StorageClass's cluster facts, taking over predecessor's storage when it is
// not nil. When the name is taken, the existing binding is used if it is
// Active with the same decision; otherwise the error is retried and the
// next look goes further.
func (l *Ledger) create(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, name string, source SourceFunc, predecessor *embedopsv1.ModelCacheBinding, options bindOptions) (*embedopsv1.ModelCacheBinding, bool, error) {
	recordedSource, err := source(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("resolving the source of the cache decision: %w", err)
	}
	recorded := l.withClusterFacts(ctx, d)
	binding := builder.Binding(server, recorded, name, recordedSource)
	if predecessor != nil {
		binding = builder.SuccessorBinding(server, recorded, name, recordedSource, predecessor)
	} else if err := l.placeBesideServing(ctx, server, binding, options); err != nil {
		return nil, false, err
	}
	maps.Copy(binding.Labels, decision.ShardLabels(server.Labels, l.shardKeys))
	err = l.client.Create(ctx, binding, client.FieldOwner(embedopsv1.FieldManager))
	if err == nil {
		l.written.Record(client.ObjectKeyFromObject(binding), binding.ResourceVersion)
		ctrl.LoggerFrom(ctx).Info("created binding", "binding", name, "method", recordedSource.Method, "revision", recordedSource.Revision)
		l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.CreatedReason, "RecordDecision",
			"recorded the cache decision of %s/%s: %s %s of %s@%s, source %s %s%s",
			server.Namespace, server.Name, d.Decision.Mode, d.Decision.Size.String(), d.Identity.Model, d.Identity.Revision,
			recordedSource.Method, recordedSource.Revision, takeoverNote(binding, predecessor))
		return binding, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("creating binding %s: %w", name, err)
	}
	existing := &embedopsv1.ModelCacheBinding{}
	if err := l.apiReader.Get(ctx, client.ObjectKeyFromObject(binding), existing); err != nil {
		return nil, false, fmt.Errorf("reading binding %s: %w", name, err)
	}
	if !decision.Reusable(existing, d) {
		return nil, false, fmt.Errorf("binding %s exists for another decision or is %s", name, existing.Status.Phase)
	}
	if !decision.SameShard(existing.Labels, server.Labels, l.shardKeys) {
		// Another shard's binding: the next look lists it and goes further.
		return nil, false, fmt.Errorf("binding %s belongs to another shard", name)
	}
	return existing, false, nil
}

// withClusterFacts adds the StorageClass's provisioner and parameters to
// d, when it is readable. An existing claim's decision gets none: the
// claim is its user's, and no StorageClass was decided.
func (l *Ledger) withClusterFacts(ctx context.Context, d *decision.Decision) *decision.Decision {
	if d.Decision.ExistingClaim != "" {
		return d
	}
	class, err := storageClassOf(ctx, l.client, d.Decision.StorageClassName)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("recording no cluster facts: the StorageClass is not readable", "error", err.Error())
		return d
	}
	if class == nil {
		return d
	}
	return decision.WithClusterFacts(d, class.Provisioner, class.Parameters)
}

// reference adds the server's reference while the binding is Active. The
// cache is trusted to show a reference the server holds, except one this
// process removed: then the binding is read again uncached. A Conflict is
// retried at once from a fresh read: returned, it would back the server off
// until the unreferenced binding retires. The server is confirmed live
// first unless serverLive says the caller's copy is. The first reference of
// a new binding writes its whole first status (firstStatus), which the
// binding controller leaves to it (awaitsCreator); when mayWait, its
// creator may wait for the claims to bind first (firstReferenceWait), and
// then returns the wait.
func (l *Ledger) reference(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, serverLive, mayWait bool) (time.Duration, error) {
	key := leftKey{binding: binding.UID, server: server.UID}
	_, wasLeft := l.left.Load(key)
	if decision.HasReference(binding, server.UID) && !wasLeft {
		return 0, nil
	}
	if mayWait {
		if wait, err := l.firstReferenceWait(ctx, server, binding); err != nil || wait > 0 {
			return wait, err
		}
	}
	if !serverLive {
		if err := l.confirmLive(ctx, server); err != nil {
			return 0, err
		}
	}
	fresh := wasLeft
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if fresh {
			if err := l.apiReader.Get(ctx, client.ObjectKeyFromObject(binding), binding); err != nil {
				return err
			}
		}
		fresh = true
		if decision.HasReference(binding, server.UID) {
			return nil
		}
		if !decision.IsActive(binding) || !binding.DeletionTimestamp.IsZero() {
			// A deleted binding is kept only by servers that hold a reference.
			return fmt.Errorf("binding %s left Active (%s) before the reference was added", binding.Name, binding.Status.Phase)
		}
		if decision.HandingOver(binding) {
			return fmt.Errorf("binding %s hands its storage to %s", binding.Name, binding.Status.SupersededBy)
		}
		first := binding.Status.Phase == ""
		binding.Status.Phase = embedopsv1.BindingActive
		decision.AddReference(binding, decision.ServerReference(server))
		if first {
			if err := l.firstStatus(ctx, binding); err != nil {
				return err
			}
		}
		if err := l.updateStatus(ctx, binding); err != nil {
			return err
		}
		l.held.add(server.UID, binding.Name)
		ctrl.LoggerFrom(ctx).Info("referenced binding", "binding", binding.Name)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("adding the reference to binding %s: %w", binding.Name, err)
	}
	l.left.Delete(key)
	return 0, nil
}

// addClaims adds the claim names the binding does not list yet, with the
// resourceVersion it was read at.
func (l *Ledger) addClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding, names []string) error {
	missing := decision.MissingNames(binding.Spec.Resources.PersistentVolumeClaimNames, names)
	if len(missing) == 0 {
		return nil
	}
	binding.Spec.Resources.PersistentVolumeClaimNames = append(binding.Spec.Resources.PersistentVolumeClaimNames, missing...)
	if err := l.client.Update(ctx, binding, client.FieldOwner(embedopsv1.FieldManager)); err != nil {
		return fmt.Errorf("adding claims to binding %s: %w", binding.Name, err)
	}
	l.written.Record(client.ObjectKeyFromObject(binding), binding.ResourceVersion)
	return nil
}

// errServerGone stops a reconcile working from a cached server that has
// been deleted: it must not reference a binding nobody would leave.
var errServerGone = errors.New("the server is gone or being deleted")

// confirmLive reads the server uncached before it references a binding: it
// must exist with this UID, hold the finalizer and not be deleting, so that
// its deletion is sure to leave the binding.
func (l *Ledger) confirmLive(ctx context.Context, server *embedopsv1.EmbeddingServer) error {
	live := &embedopsv1.EmbeddingServer{}
	err := l.apiReader.Get(ctx, client.ObjectKeyFromObject(server), live)
	switch {
	case apierrors.IsNotFound(err):
		return errServerGone
	case err != nil:
		return fmt.Errorf("reading the server: %w", err)
	case live.UID != server.UID || !live.DeletionTimestamp.IsZero() ||
		!controllerutil.ContainsFinalizer(live, embedopsv1.ServerFinalizer):
		return errServerGone
	}
	return nil
}

// takeoverNote tells, in a Created event, whose storage a successor took
// over; empty for a binding with storage of its own.
func takeoverNote(binding, predecessor *embedopsv1.ModelCacheBinding) string {
	if binding.Spec.Supersedes == "" || predecessor == nil {
		return ""
	}
	why := "retainFor alone changed"
	switch {
	case predecessor.Spec.Identity.Revision != binding.Spec.Identity.Revision:
		why = "the revision changed: the pods roll in place and fetch only the files the claims lack"
	case predecessor.Spec.Decision.Size.Cmp(binding.Spec.Decision.Size) != 0:
		why = "a larger size: the claims are expanded in place"
	}
	return fmt.Sprintf("; supersedes %s and keeps its claims (%s)", binding.Spec.Supersedes, why)
}

// placeBesideServing gives a new PerReplica binding a StatefulSet of its
// own (decision.RolloutStatefulSetName) when one under the server's name
// exists: that one serves another storage, and its claim templates cannot
// change (k8s pkg/apis/apps/validation, "updates to statefulset spec for
// fields other than ... are forbidden"), so the new pods start beside its
// pods instead of replacing them. Read uncached: a binding is created
// rarely, and a StatefulSet created a moment ago must be seen; unless the
// caller read so a moment ago (StatefulSetAbsent).
func (l *Ledger) placeBesideServing(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, options bindOptions) error {
	if binding.Spec.Decision.Mode != embedopsv1.CacheModePerReplica || binding.Spec.Decision.ExistingClaim != "" || options.statefulSetAbsent {
		return nil
	}
	serving, err := l.statefulSet(ctx, client.ObjectKeyFromObject(server))
	if err != nil || serving == nil {
		return err
	}
	name, err := l.freeRolloutName(ctx, server, decision.StorageName(binding))
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
func (l *Ledger) freeRolloutName(ctx context.Context, server *embedopsv1.EmbeddingServer, storage string) (string, error) {
	return decision.FreeRolloutName(server.Name, storage, func(name string) (bool, error) {
		existing, err := l.statefulSet(ctx, types.NamespacedName{Namespace: server.Namespace, Name: name})
		return existing == nil || (existing.Labels[embedopsv1.NameLabel] == server.Name && existing.Labels[embedopsv1.NamespaceLabel] == server.Namespace), err
	})
}

// usable reports whether the server may use binding for d
// (decision.Usable) in its own shard (decision.SameShard), and, for a
// PerReplica binding it does not reference
// yet (a reverted decision), whether the StatefulSet that makes its claims
// is free for it: a StatefulSet of that name serving other storage cannot
// take its claim templates in place, so reusing the binding would replace
// the serving pods. Such a binding is passed over and the decision gets new
// storage, which rolls. Read uncached, as placeBesideServing.
func (l *Ledger) usable(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, d *decision.Decision) (bool, error) {
	if !decision.Usable(binding, d, server.UID) || !decision.SameShard(binding.Labels, server.Labels, l.shardKeys) {
		return false, nil
	}
	if binding.Spec.Decision.Mode != embedopsv1.CacheModePerReplica || decision.HasReference(binding, server.UID) ||
		decision.AwaitsFirstReference(binding, server.UID) {
		// Its StatefulSet is the server's: it made it for this binding.
		return true, nil
	}
	sts, err := l.statefulSet(ctx, types.NamespacedName{Namespace: server.Namespace, Name: decision.StatefulSetNameFor(binding, server.Name)})
	if err != nil || sts == nil {
		return err == nil, err
	}
	return sts.Spec.Template.Labels[embedopsv1.CacheBindingLabel] == decision.StorageName(binding), nil
}

// statefulSet reads a StatefulSet from the API server; nil when there is
// none.
func (l *Ledger) statefulSet(ctx context.Context, key types.NamespacedName) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := l.apiReader.Get(ctx, key, sts)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading StatefulSet %s: %w", key.Name, err)
	}
	return sts, nil
}
