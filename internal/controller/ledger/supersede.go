package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// predecessorWait is how often a binding whose predecessor is still Active
// looks again before it retires; the predecessor's release also wakes it.
const predecessorWait = 30 * time.Second

// predecessor returns, read uncached, the binding whose storage a new binding
// of d takes over: the one the server's children use (status.cacheBinding,
// followed along the successors it references), when d differs from it
// only where the storage can follow (takesOver) and the server may hand it
// over (decision.Supersedable). nil means the new binding gets storage of
// its own. When the binding in use still awaits the server's first
// reference (decision.AwaitsFirstReference), it is returned as
// firstReference instead, undecided: the reference is written first, and
// the binding is judged as it leaves it.
func (r *reads) predecessor(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision) (predecessor, firstReference *embedopsv1.ModelCacheBinding, err error) {
	name, err := r.bindingInUse(ctx, server)
	if err != nil {
		return nil, nil, err
	}
	for range decision.MaxBindingSuffix {
		if name == "" {
			return nil, nil, nil
		}
		binding, err := r.read(ctx, types.NamespacedName{Namespace: server.Namespace, Name: name})
		if err != nil || binding == nil {
			return nil, nil, err
		}
		if decision.AwaitsFirstReference(binding, server.UID) {
			// The server's first storage, whose reference waits for its
			// claims (firstReferenceWait): referenced now, it may be
			// handed over as any binding the server alone uses.
			return nil, binding, nil
		}
		successor, err := r.successorOf(ctx, binding)
		switch {
		case err != nil:
			return nil, nil, err
		case successor != nil && decision.HasReference(successor, server.UID):
			name = successor.Name
			continue
		case successor != nil:
			return nil, nil, nil
		}
		// A binding of d itself is the server's to use, not to supersede: the
		// cache did not show it yet. A server moved to another shard keeps no
		// storage of the old one.
		if !decision.Supersedable(binding, server.UID) || decision.MatchesDecision(binding, d) ||
			!decision.SameShard(binding.Labels, server.Labels, r.shardKeys) {
			return nil, nil, nil
		}
		predecessor, err := r.takesOver(ctx, server, binding, d)
		return predecessor, nil, err
	}
	return nil, nil, nil
}

// takesOver returns binding when a new binding of d takes over its storage
// by decision.Takeover, nil otherwise: a rule whose fact is not known (the
// size of a model no populator recorded) gets storage of its own. The
// StorageClass is read only for a larger size.
func (r *reads) takesOver(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, d *decision.Decision) (*embedopsv1.ModelCacheBinding, error) {
	var readErr error
	kind, unknown := decision.Takeover(binding, d, decision.TakeoverFacts{
		Replicas:           server.GetReplicas(),
		AllowedUnavailable: new(builder.AllowedUnavailable(server)),
		ClassExpands: func() (bool, bool) {
			expands, err := r.classExpands(ctx, binding)
			readErr = err
			return expands, err == nil
		},
	})
	if readErr != nil {
		return nil, readErr
	}
	if kind == decision.NoSuccession || len(unknown) > 0 {
		return nil, nil
	}
	return binding, nil
}

// markHandingOver marks predecessor as handing its storage to successor.
// The mark is written with the resourceVersion the predecessor was read
// at, when it was referenced by this server alone (decision.Supersedable):
// from then on it gains no reference, so nobody else comes to use the
// storage the successor takes over.
func (l *Ledger) markHandingOver(ctx context.Context, predecessor *embedopsv1.ModelCacheBinding, successor string) error {
	if predecessor.Status.SupersededBy == successor {
		return nil
	}
	predecessor.Status.SupersededBy = successor
	if err := l.updateStatus(ctx, predecessor); err != nil {
		return fmt.Errorf("marking binding %s superseded: %w", predecessor.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("handing a binding's storage to its successor", "binding", predecessor.Name, "successor", successor)
	return nil
}

// supersede hands binding's claims to holder and records binding Released
// as Superseded, deleting nothing. holder first lists every claim binding
// lists and takes the controller reference of those binding controls: a
// Released binding is pruned by the history limit, and the garbage
// collector would delete what it still controls. Each step is idempotent,
// so a reconcile that dies between them is completed by the next.
func (l *Ledger) supersede(ctx context.Context, binding, holder *embedopsv1.ModelCacheBinding) error {
	if err := l.addClaims(ctx, holder, binding.Spec.Resources.PersistentVolumeClaimNames); err != nil {
		return err
	}
	if err := l.adoptClaims(ctx, binding, holder); err != nil {
		return err
	}
	decision.Supersede(binding, l.now())
	setReadiness(binding, nil)
	if err := l.updateStatus(ctx, binding); err != nil {
		return fmt.Errorf("releasing superseded binding: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("binding superseded", "binding", binding.Name, "holder", holder.Name)
	l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.SupersededReason, "Supersede",
		"binding %s took over claims %v; nothing was deleted, this binding is an audit record",
		holder.Name, binding.Spec.Resources.PersistentVolumeClaimNames)
	return nil
}

// adoptClaims moves the controller reference of the claims binding controls
// to holder, each written with the resourceVersion it was read at.
func (l *Ledger) adoptClaims(ctx context.Context, binding, holder *embedopsv1.ModelCacheBinding) error {
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		claim := &corev1.PersistentVolumeClaim{}
		err := l.apiReader.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: name}, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading claim %s: %w", name, err)
		}
		controller := metav1.GetControllerOfNoCopy(claim)
		if controller == nil || controller.UID != binding.UID {
			continue
		}
		claim.OwnerReferences = slices.DeleteFunc(claim.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == binding.UID })
		claim.OwnerReferences = append(claim.OwnerReferences, *metav1.NewControllerRef(holder, embedopsv1.GroupVersion.WithKind(embedopsv1.ModelCacheBindingKind)))
		if err := l.client.Update(ctx, claim, client.FieldOwner(embedopsv1.FieldManager)); err != nil {
			return fmt.Errorf("handing claim %s to binding %s: %w", name, holder.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("handed a claim to the binding that took it over", "claim", name, "from", binding.Name, "to", holder.Name)
	}
	return nil
}

// inheritRealized records on a successor what its predecessor realized,
// once: the claims hold the same files, and the server keeps running the
// commit they hold instead of resolving or populating again.
func (l *Ledger) inheritRealized(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if binding.Spec.Supersedes == "" || binding.Status.Realized != nil {
		return nil
	}
	// From the cache: realized fields are immutable once set, and a
	// steady reconcile reads nothing from the API server.
	predecessor := &embedopsv1.ModelCacheBinding{}
	if err := l.client.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: binding.Spec.Supersedes}, predecessor); err != nil {
		return client.IgnoreNotFound(err)
	}
	// A successor of another revision records its own commit (from its
	// resolve Job); the predecessor's is of the old one.
	if predecessor.Status.Realized == nil || predecessor.Spec.Identity.Revision != binding.Spec.Identity.Revision {
		return nil
	}
	_, err := l.RecordRealized(ctx, binding, predecessor.Status.Realized)
	return err
}

// retirement says what an idle binding past its retainFor does instead of
// retiring: hand its storage to holder, or wait while the binding it
// superseded is still Active. Neither: it retires.
func (r *reads) retirement(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (*embedopsv1.ModelCacheBinding, bool, error) {
	if decision.HandingOver(binding) {
		holder, err := r.holderOf(ctx, binding)
		if err != nil || holder != nil {
			return holder, false, err
		}
	}
	wait, err := r.predecessorActive(ctx, binding)
	return nil, wait, err
}

// predecessorActive reports whether the binding binding superseded is still
// Active: its storage is not binding's until that one is Released, so
// binding must not retire and delete it.
func (r *reads) predecessorActive(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (bool, error) {
	if binding.Spec.Supersedes == "" {
		return false, nil
	}
	predecessor, err := r.read(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: binding.Spec.Supersedes})
	if err != nil || predecessor == nil {
		return false, err
	}
	return decision.IsActive(predecessor), nil
}

// successorOf returns, read uncached, the binding that binding hands its
// storage to, when it exists and records it (decision.Succeeds); nil
// otherwise.
func (r *reads) successorOf(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (*embedopsv1.ModelCacheBinding, error) {
	if !decision.HandingOver(binding) {
		return nil, nil
	}
	successor, err := r.read(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: binding.Status.SupersededBy})
	if err != nil || successor == nil || !decision.Succeeds(successor, binding) {
		return nil, err
	}
	return successor, nil
}

// holderOf returns the binding that holds the storage binding hands over:
// its successor, or that one's, up to the first that is not Released as
// superseded. nil when the chain ends at a binding that is missing,
// Retiring or Released without a successor: binding then retires as any
// other.
func (r *reads) holderOf(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (*embedopsv1.ModelCacheBinding, error) {
	current := binding
	for range decision.MaxBindingSuffix {
		next, err := r.successorOf(ctx, current)
		switch {
		case err != nil || next == nil:
			return nil, err
		case decision.IsActive(next):
			return next, nil
		case next.Status.Phase == embedopsv1.BindingReleased && decision.HandingOver(next):
			current = next
		default:
			return nil, nil
		}
	}
	return nil, nil
}

// bindingInUse names the binding the server's children use:
// status.cacheBinding, or, while the status names none (a new server's
// first status waits for Ready), the one Active binding the server created
// and references or is to reference first, read from the cache. Empty when
// there is none, or more than one.
func (r *reads) bindingInUse(ctx context.Context, server *embedopsv1.EmbeddingServer) (string, error) {
	if server.Status.CacheBinding != "" {
		return server.Status.CacheBinding, nil
	}
	var created embedopsv1.ModelCacheBindingList
	if err := r.cache.List(ctx, &created, client.InNamespace(server.Namespace), client.MatchingLabels{embedopsv1.ServerUIDLabel: string(server.UID)}); err != nil {
		return "", fmt.Errorf("listing the bindings the server created: %w", err)
	}
	var names []string
	for i := range created.Items {
		binding := &created.Items[i]
		if decision.AwaitsFirstReference(binding, server.UID) ||
			binding.Status.Phase == embedopsv1.BindingActive && decision.HasReference(binding, server.UID) {
			names = append(names, binding.Name)
		}
	}
	if len(names) != 1 {
		return "", nil
	}
	return names[0], nil
}
