package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// DefaultReleaseInterval is how often a Retiring binding looks again at the
// claims it is waiting to be gone.
const DefaultReleaseInterval = 2 * time.Second

// podWaitFactor stretches the release interval while a pod still mounts a
// claim: each look lists the namespace's pods uncached (claimUsers), and a
// user's pod may hold a claim for days.
const podWaitFactor = 5

// CreatorGrace is how long a new binding, whose status nobody wrote yet, is
// left to the server that created it: that server's first reference writes
// its whole first status (firstStatus), so the binding controller writing
// one too would only make the two conflict. Past it, the creator is taken to
// have died in between, and the binding is Active with no reference, unless
// it is a PerReplica binding whose creator still exists (awaitsCreator).
const CreatorGrace = 30 * time.Second

// Advance moves the binding, as read, one step along its lifecycle and
// returns when to look at it again.
func (l *Ledger) Advance(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	wait, err := l.awaitsCreator(ctx, binding)
	if err != nil || wait > 0 {
		return withJitter(ctrl.Result{RequeueAfter: wait}), err
	}
	switch binding.Status.Phase {
	case embedopsv1.BindingRetiring:
		return l.release(ctx, binding)
	case embedopsv1.BindingReleased:
		return l.keepReleased(ctx, binding)
	default:
		return l.keepActive(ctx, binding)
	}
}

// keepActive creates the Shared claim, reports drift and readiness, drops
// the references of servers that are gone and keeps the idle window; an idle
// binding past retireAfter (at once when it is being deleted) moves to
// Retiring, unless it hands its storage to a holder (it is superseded) or
// the binding it superseded is still Active (it waits).
func (l *Ledger) keepActive(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	now := l.now()
	before := binding.Status.DeepCopy()
	binding.Status.Phase = embedopsv1.BindingActive
	claims, err := l.ensureClaims(ctx, binding)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := l.reportDrift(ctx, binding, claims); err != nil {
		return ctrl.Result{}, err
	}
	if err := l.dropDanglingReferences(ctx, binding); err != nil {
		return ctrl.Result{}, err
	}
	action := decision.ActiveAction(binding, now)
	if action == decision.RetireNow {
		holder, wait, err := l.retirement(ctx, binding)
		switch {
		case err != nil:
			return ctrl.Result{}, err
		case holder != nil:
			return ctrl.Result{}, l.supersede(ctx, binding, holder)
		case wait:
			action = decision.WaitIdle
		}
	}
	var result ctrl.Result
	switch action {
	case decision.StartIdle:
		decision.MarkIdle(binding, now, true)
		result.RequeueAfter = decision.UntilRetirement(binding, now)
	case decision.EndIdle:
		binding.Status.IdleSince, binding.Status.RetireAfter = nil, nil
	case decision.WaitIdle:
		result.RequeueAfter = decision.UntilRetirement(binding, now)
		if result.RequeueAfter == 0 {
			result.RequeueAfter = predecessorWait // past retainFor, held by its predecessor
		}
	case decision.RetireNow:
		binding.Status.Phase = embedopsv1.BindingRetiring
	case decision.StayActive:
	}
	setReadiness(binding, byName(claims))
	binding.Status.ObservedGeneration = binding.Generation
	if equality.Semantic.DeepEqual(before, &binding.Status) {
		return withJitter(result), nil
	}
	if err := l.updateStatus(ctx, binding); err != nil {
		return ctrl.Result{}, err
	}
	if binding.Status.Phase == embedopsv1.BindingRetiring {
		ctrl.LoggerFrom(ctx).Info("binding retiring", "binding", binding.Name, "idleSince", before.IdleSince)
		l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.RetiringReason, "Retire",
			"no server has used this cache for its retainFor of %s (or the binding is being deleted): deleting claims %v",
			binding.Spec.Decision.RetainFor.Duration, binding.Spec.Resources.PersistentVolumeClaimNames)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return withJitter(result), nil
}

// awaitsCreator is how much longer a binding that a server created and has
// not referenced yet is left to it: CreatorGrace, and a PerReplica binding
// (decision.AwaitsFirstReference) for as long as its creator exists,
// looking again every CreatorGrace; a creator that leaves it writes its
// status first (abandonAwaiting). Zero for any other binding: it is taken
// as Active and unreferenced.
func (l *Ledger) awaitsCreator(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (time.Duration, error) {
	creator := types.UID(binding.Labels[embedopsv1.ServerUIDLabel])
	if binding.Status.Phase != "" || creator == "" || !binding.DeletionTimestamp.IsZero() {
		return 0, nil
	}
	if age := l.now().Sub(binding.CreationTimestamp.Time); age < CreatorGrace {
		return CreatorGrace - age, nil
	}
	namespace, name, ok := strings.Cut(binding.Spec.Identity.SharingDomain, "/")
	if !decision.AwaitsFirstReference(binding, creator) || !ok || namespace != binding.Namespace {
		return 0, nil
	}
	live, err := l.serverInShard(ctx, binding, client.ObjectKey{Namespace: namespace, Name: name}, creator)
	if err != nil || !live {
		return 0, err
	}
	return CreatorGrace, nil
}

// firstStatus completes the first status of a new binding, which its first
// reference writes: what keepActive would find (drift, readiness from the
// claims that exist, the observed generation), so the binding controller's
// first look writes nothing.
func (l *Ledger) firstStatus(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	claims, err := l.existingClaims(ctx, binding)
	if err != nil {
		return err
	}
	if err := l.reportDrift(ctx, binding, claims); err != nil {
		return err
	}
	setReadiness(binding, byName(claims))
	binding.Status.ObservedGeneration = binding.Generation
	return nil
}

// release deletes the binding's claims once nothing can use them again:
// its populate Job goes first (stopPopulating), no StatefulSet may create
// them again and no pod may name them. Once they are gone it records
// Released, drops the finalizer and prunes the server's history.
func (l *Ledger) release(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	if err := l.stopPopulating(ctx, binding); err != nil {
		return ctrl.Result{}, err
	}
	remaining, waits, err := l.releasePass(ctx, binding)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := l.reportWaits(ctx, binding, waits); err != nil {
		return ctrl.Result{}, err
	}
	if next := l.nextReleaseLook(remaining, waits); next.RequeueAfter > 0 {
		return next, nil
	}
	binding.Status.Phase = embedopsv1.BindingReleased
	binding.Status.ReleasedAt = &metav1.Time{Time: l.now()}
	setReadiness(binding, nil)
	if err := l.updateStatus(ctx, binding); err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("binding released", "binding", binding.Name)
	l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.ReleasedReason, "Release",
		"the cached data of %s@%s is released; the binding stays as an audit record", binding.Spec.Identity.Model, binding.Spec.Identity.Revision)
	return ctrl.Result{}, l.keepRecord(ctx, binding)
}

// releasePass waits for a StatefulSet that can still create one of the
// binding's claims (a server deleted during its first reconcile may leave
// one for a moment), and otherwise deletes the claims (releaseClaims) and
// the snapshots (releaseSnapshots). It returns how many of them remain and
// what the deletion waits for.
func (l *Ledger) releasePass(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (int, []string, error) {
	maker, err := l.statefulSetMakingClaims(ctx, binding)
	if err != nil {
		return 0, nil, err
	}
	if maker != "" {
		return 0, []string{fmt.Sprintf("the claims are deleted once StatefulSet %s, which can create them, is gone", maker)}, nil
	}
	remaining, waits, err := l.releaseClaims(ctx, binding)
	if err != nil {
		return 0, nil, err
	}
	snapshots, err := l.releaseSnapshots(ctx, binding)
	return remaining + snapshots, waits, err
}

// reportWaits adds what the deletion of a Retiring binding's claims waits
// for to its Ready and Reconciling messages, so kubectl shows why a
// retirement takes long; each condition is set once, so the status is
// written only when that changes.
func (l *Ledger) reportWaits(ctx context.Context, binding *embedopsv1.ModelCacheBinding, waits []string) error {
	before := binding.Status.DeepCopy()
	ready := decision.BindingReadiness(binding, nil)
	message := strings.Join(append([]string{ready.Message}, waits...), "; ")
	conditions.MarkFalse(binding, embedopsv1.ReadyCondition, ready.Reason, "%s", message)
	conditions.MarkReconciling(binding, embedopsv1.RetiringReason, "%s", message)
	if equality.Semantic.DeepEqual(before, &binding.Status) {
		return nil
	}
	return l.updateStatus(ctx, binding)
}

// keepReleased keeps a Released binding's record. One superseded hands its
// claims over, not its snapshots: it deletes those. One retired deleted its
// snapshots in release, and deletes a claim of its own that appears after
// it (deleteLateClaims).
func (l *Ledger) keepReleased(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	var result ctrl.Result
	var err error
	if decision.HandingOver(binding) {
		_, err = l.releaseSnapshots(ctx, binding)
	} else {
		result, err = l.deleteLateClaims(ctx, binding)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return result, l.keepRecord(ctx, binding)
}

// deleteLateClaims deletes the claims of a retired Released binding that
// exist again. The StatefulSet controller can make one after the binding
// saw its StatefulSet gone: its pod and StatefulSet informers are separate
// watches, so a pod's deletion can reach it before the StatefulSet's and it
// creates the missing claim from the StatefulSet it still has
// (kubernetes v1.37.2 pkg/controller/statefulset/stateful_pod_control.go,
// createPersistentVolumeClaims). Nobody else would delete it. The cache is
// looked at first, so a Released binding costs no request while none
// exists; then releaseClaims reads live and waits for pods as in release.
func (l *Ledger) deleteLateClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	late, err := l.existingClaims(ctx, binding)
	if err != nil || len(late) == 0 {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("a claim of a released binding exists again", "binding", binding.Name, "claim", late[0].Name)
	remaining, waits, err := l.releaseClaims(ctx, binding)
	if err != nil {
		return ctrl.Result{}, err
	}
	return l.nextReleaseLook(remaining, waits), nil
}

// nextReleaseLook is when a release looks again at what remains of it:
// five intervals while a pod holds a claim, one while a deletion is under
// way, and never (zero) once nothing remains.
func (l *Ledger) nextReleaseLook(remaining int, waits []string) ctrl.Result {
	switch {
	case len(waits) > 0:
		return withJitter(ctrl.Result{RequeueAfter: podWaitFactor * l.releaseInterval})
	case remaining > 0:
		return withJitter(ctrl.Result{RequeueAfter: l.releaseInterval})
	}
	return ctrl.Result{}
}

// keepRecord drops the finalizer of a Released binding and prunes its
// server's history.
func (l *Ledger) keepRecord(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if err := l.removeFinalizer(ctx, binding); err != nil {
		return err
	}
	return l.pruneHistory(ctx, binding)
}

// setReadiness sets the binding's kstatus conditions: Ready from its phase
// and claims, Reconciling while it is Retiring.
func setReadiness(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) {
	ready := decision.BindingReadiness(binding, claims)
	if ready.Status == metav1.ConditionTrue {
		conditions.MarkTrue(binding, embedopsv1.ReadyCondition, ready.Reason, "%s", ready.Message)
	} else {
		conditions.MarkFalse(binding, embedopsv1.ReadyCondition, ready.Reason, "%s", ready.Message)
	}
	if binding.Status.Phase == embedopsv1.BindingRetiring {
		conditions.MarkReconciling(binding, embedopsv1.RetiringReason, "%s", ready.Message)
	} else {
		conditions.Delete(binding, embedopsv1.ReconcilingCondition)
	}
}

// byName indexes claims by name.
func byName(claims []corev1.PersistentVolumeClaim) map[string]*corev1.PersistentVolumeClaim {
	index := make(map[string]*corev1.PersistentVolumeClaim, len(claims))
	for i := range claims {
		index[claims[i].Name] = &claims[i]
	}
	return index
}

// withJitter adds up to a tenth to a requeue, so bindings decided together
// do not come back together; never less than asked, so a retirement is
// never early.
func withJitter(result ctrl.Result) ctrl.Result {
	if result.RequeueAfter > 0 {
		result.RequeueAfter += time.Duration(rand.Int64N(int64(result.RequeueAfter)/10 + 1))
	}
	return result
}
