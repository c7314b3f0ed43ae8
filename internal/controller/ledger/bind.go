package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
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
// references it and adds the claims of the server's current replicas. The
// binding is chosen from reads alone (choose), then written (carryOut);
// when the plan is only the first reference the binding in use is owed,
// the binding is chosen again from what that write left.
func (l *Ledger) Bind(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, source SourceFunc, opts ...BindOption) (Bound, error) {
	var options bindOptions
	for _, opt := range opts {
		opt(&options)
	}
	binding, created, err := l.chooseAndCarryOut(ctx, server, d, source, options)
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

// chooseAndCarryOut chooses the binding of d and writes the plan; a plan
// that is only a first reference is chosen again once it is written, from
// fresh reads: the reference changed what the choice read (its phase and
// references), and a write that retried a Conflict read the binding anew.
func (l *Ledger) chooseAndCarryOut(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, source SourceFunc, options bindOptions) (*embedopsv1.ModelCacheBinding, bool, error) {
	for range 2 {
		plan, err := l.choose(ctx, server, d, source, options)
		if err != nil {
			return nil, false, err
		}
		if plan.firstReference == nil {
			return l.carryOut(ctx, server, d, plan)
		}
		if _, err := l.reference(ctx, server, plan.firstReference, false, false); err != nil {
			return nil, false, err
		}
	}
	return nil, false, fmt.Errorf("the binding the server uses still awaits its first reference after it was written")
}

// carryOut writes what choose decided, in order: the predecessor's
// hand-over mark, then the new binding. The mark is an update with the
// resourceVersion the predecessor was read at, so a predecessor changed
// since choose read it is a Conflict and the next reconcile chooses again;
// the create fails on a name taken since (create). It returns the binding
// the server uses and whether it created it.
func (l *Ledger) carryOut(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, plan bindPlan) (*embedopsv1.ModelCacheBinding, bool, error) {
	if plan.use != nil {
		return plan.use, false, nil
	}
	if predecessor := plan.predecessor; predecessor != nil {
		if err := l.markHandingOver(ctx, predecessor, plan.create.Name); err != nil {
			return nil, false, err
		}
	}
	return l.create(ctx, server, d, plan.create, plan.predecessor)
}

// create creates binding, built by newBinding. When its name is taken, the
// existing binding is used if it is Active with the same decision;
// otherwise the error is retried and the next look goes further.
func (l *Ledger) create(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, binding, predecessor *embedopsv1.ModelCacheBinding) (*embedopsv1.ModelCacheBinding, bool, error) {
	name, source := binding.Name, binding.Spec.Source
	err := l.client.Create(ctx, binding, client.FieldOwner(embedopsv1.FieldManager))
	if err == nil {
		l.written.Record(client.ObjectKeyFromObject(binding), binding.ResourceVersion)
		ctrl.LoggerFrom(ctx).Info("created binding", "binding", name, "method", source.Method, "revision", source.Revision)
		l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.CreatedReason, "RecordDecision",
			"recorded the cache decision of %s/%s: %s %s of %s@%s, source %s %s%s",
			server.Namespace, server.Name, d.Decision.Mode, d.Decision.Size.String(), d.Identity.Model, d.Identity.Revision,
			source.Method, source.Revision, takeoverNote(binding, predecessor))
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
