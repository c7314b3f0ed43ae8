package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/events"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// DefaultBindingHistoryLimit is how many Released bindings are kept per
// server.
const DefaultBindingHistoryLimit = 10

// DefaultReleaseInterval is how often a Retiring binding looks again at the
// claims it is waiting to be gone.
const DefaultReleaseInterval = 2 * time.Second

// defaultStorageClassAnnotation marks the cluster's default StorageClass.
const defaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// ModelCacheBindingReconcilerOptions configure the ModelCacheBinding
// reconciler.
type ModelCacheBindingReconcilerOptions struct {
	// HistoryLimit is how many Released bindings are kept per server; 0
	// means DefaultBindingHistoryLimit.
	HistoryLimit int
	// ReleaseInterval is how often a Retiring binding looks at its claims;
	// 0 means DefaultReleaseInterval.
	ReleaseInterval time.Duration
}

// ModelCacheBindingReconciler runs the binding lifecycle: idle bindings
// retire after retainFor, Retiring bindings delete their claims and become
// Released, old Released bindings are pruned. Its zero value is set up by
// SetupWithManager.
type ModelCacheBindingReconciler struct {
	client          client.Client
	apiReader       client.Reader
	events          events.Recorder
	historyLimit    int
	releaseInterval time.Duration
	now             func() time.Time
}

// newModelCacheBindingReconciler returns a reconciler writing with c and
// reading claims to delete with apiReader.
func newModelCacheBindingReconciler(c client.Client, apiReader client.Reader, recorder events.Recorder, opts ModelCacheBindingReconcilerOptions) *ModelCacheBindingReconciler {
	r := &ModelCacheBindingReconciler{client: c, apiReader: apiReader, events: recorder, historyLimit: opts.HistoryLimit, releaseInterval: opts.ReleaseInterval, now: time.Now}
	if r.historyLimit <= 0 {
		r.historyLimit = DefaultBindingHistoryLimit
	}
	if r.releaseInterval <= 0 {
		r.releaseInterval = DefaultReleaseInterval
	}
	return r
}

// SetupWithManager wires the reconciler into mgr: bindings, the claims they
// own and the StorageClasses they record.
func (r *ModelCacheBindingReconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts ModelCacheBindingReconcilerOptions) error {
	recorder, err := events.NewRecorder(mgr.GetLogger().WithName("events"), "", embedopsv1.FieldManager, events.WithManager(mgr))
	if err != nil {
		return fmt.Errorf("creating the event recorder: %w", err)
	}
	*r = *newModelCacheBindingReconciler(mgr.GetClient(), mgr.GetAPIReader(), recorder, opts)
	return ctrl.NewControllerManagedBy(mgr).
		For(&embedopsv1.ModelCacheBinding{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfStorageClass)).
		Complete(r)
}

// Reconcile moves one binding along its lifecycle.
func (r *ModelCacheBindingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	binding := &embedopsv1.ModelCacheBinding{}
	if err := r.client.Get(ctx, req.NamespacedName, binding); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.reconcileBinding(ctx, binding)
}

// reconcileBinding runs the step of the binding's phase on the binding as
// read; every status write carries its resourceVersion.
func (r *ModelCacheBindingReconciler) reconcileBinding(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	if !binding.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, binding)
	}
	switch binding.Status.Phase {
	case embedopsv1.BindingRetiring:
		return r.reconcileRetiring(ctx, binding)
	case embedopsv1.BindingReleased:
		return ctrl.Result{}, r.reconcileReleased(ctx, binding)
	default:
		return r.reconcileActive(ctx, binding)
	}
}

// reconcileDelete lets a deleted binding go only once it is Released: the
// finalizer holds its claims until then.
func (r *ModelCacheBindingReconciler) reconcileDelete(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if binding.Status.Phase != embedopsv1.BindingReleased {
		return nil
	}
	return r.removeFinalizer(ctx, binding)
}

// reconcileActive creates the Shared claim, reports drift, drops the
// references of servers that are gone and keeps the idle window; an idle
// binding past retireAfter moves to Retiring.
func (r *ModelCacheBindingReconciler) reconcileActive(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	now := r.now()
	before := binding.Status.DeepCopy()
	if binding.Status.Phase == "" {
		binding.Status.Phase = embedopsv1.BindingActive
	}
	claims, err := r.ensureClaims(ctx, binding)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reportDrift(ctx, binding, claims); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.dropDanglingReferences(ctx, binding); err != nil {
		return ctrl.Result{}, err
	}
	var result ctrl.Result
	switch activeAction(binding, now) {
	case startIdle:
		markIdle(binding, now, true)
		result.RequeueAfter = untilRetirement(binding, now)
	case endIdle:
		binding.Status.IdleSince, binding.Status.RetireAfter = nil, nil
	case waitIdle:
		result.RequeueAfter = untilRetirement(binding, now)
	case retireNow:
		binding.Status.Phase = embedopsv1.BindingRetiring
	case stayActive:
	}
	binding.Status.ObservedGeneration = binding.Generation
	if equality.Semantic.DeepEqual(before, &binding.Status) {
		return result, nil
	}
	if err := r.updateStatus(ctx, binding); err != nil {
		return ctrl.Result{}, err
	}
	if binding.Status.Phase == embedopsv1.BindingRetiring {
		ctrl.LoggerFrom(ctx).Info("binding retiring", "binding", binding.Name, "idleSince", before.IdleSince)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return result, nil
}

// reconcileRetiring deletes the claims, each with the UID and
// resourceVersion it was read at, waits until they are gone and no
// StatefulSet can create one of them again, then records Released and drops
// the finalizer.
func (r *ModelCacheBindingReconciler) reconcileRetiring(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (ctrl.Result, error) {
	remaining, err := r.releaseClaims(ctx, binding)
	if err != nil {
		return ctrl.Result{}, err
	}
	if remaining > 0 {
		return ctrl.Result{RequeueAfter: r.releaseInterval}, nil
	}
	if user, err := r.statefulSetMakingClaims(ctx, binding); err != nil || user != "" {
		if user != "" {
			ctrl.LoggerFrom(ctx).V(1).Info("waiting for a StatefulSet that can still create claims of the binding", "statefulSet", user)
		}
		return ctrl.Result{RequeueAfter: r.releaseInterval}, err
	}
	binding.Status.Phase = embedopsv1.BindingReleased
	binding.Status.ReleasedAt = &metav1.Time{Time: r.now()}
	if err := r.updateStatus(ctx, binding); err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("binding released", "binding", binding.Name)
	return ctrl.Result{}, r.reconcileReleased(ctx, binding)
}

// releaseClaims deletes the binding's claims that still exist and returns
// how many do. Claims are read from the API server, not the cache, so the
// preconditions name the claim as it is.
func (r *ModelCacheBindingReconciler) releaseClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (int, error) {
	remaining := 0
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		claim := &corev1.PersistentVolumeClaim{}
		err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: name}, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading claim %s: %w", name, err)
		}
		remaining++
		if !claim.DeletionTimestamp.IsZero() {
			continue
		}
		preconditions := client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion}
		err = r.client.Delete(ctx, claim, preconditions)
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("deleting claim %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted cache claim", "binding", binding.Name, "claim", name)
	}
	return remaining, nil
}

// reconcileReleased drops the finalizer and prunes the server's history.
func (r *ModelCacheBindingReconciler) reconcileReleased(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if err := r.removeFinalizer(ctx, binding); err != nil {
		return err
	}
	return r.pruneHistory(ctx, binding)
}

// removeFinalizer drops the cache-protection finalizer.
func (r *ModelCacheBindingReconciler) removeFinalizer(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if !controllerutil.ContainsFinalizer(binding, embedopsv1.CacheProtectionFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(binding.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(binding, embedopsv1.CacheProtectionFinalizer)
	if err := r.client.Patch(ctx, binding, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing the finalizer of binding %s: %w", binding.Name, err))
	}
	return nil
}

// pruneHistory deletes the oldest Released bindings of the binding's server
// beyond the history limit.
func (r *ModelCacheBindingReconciler) pruneHistory(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	server, ok := binding.Labels[bindingServerLabel]
	if !ok {
		return nil
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.client.List(ctx, &bindings, client.InNamespace(binding.Namespace), client.MatchingLabels{bindingServerLabel: server}); err != nil {
		return fmt.Errorf("listing the bindings of server %s: %w", server, err)
	}
	for _, old := range prunable(bindings.Items, r.historyLimit) {
		err := r.client.Delete(ctx, &old, client.Preconditions{UID: &old.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("pruning binding %s: %w", old.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("pruned released binding", "binding", old.Name)
	}
	return nil
}

// updateStatus writes the binding's status with the resourceVersion it was
// read at: a concurrent change makes it a Conflict, retried from a fresh
// read.
func (r *ModelCacheBindingReconciler) updateStatus(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if err := r.client.Status().Update(ctx, binding, client.FieldOwner(embedopsv1.StatusFieldManager)); err != nil {
		return fmt.Errorf("updating the status of binding %s: %w", binding.Name, err)
	}
	return nil
}

// ensureClaims creates the missing claims of a Shared binding and returns
// the binding's claims that exist. PerReplica claims are the StatefulSet's
// to create.
func (r *ModelCacheBindingReconciler) ensureClaims(ctx context.Context, binding *embedopsv1.ModelCacheBinding) ([]corev1.PersistentVolumeClaim, error) {
	var claims []corev1.PersistentVolumeClaim
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		claim := &corev1.PersistentVolumeClaim{}
		err := r.client.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: name}, claim)
		switch {
		case err == nil:
			claims = append(claims, *claim)
			continue
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading claim %s: %w", name, err)
		case binding.Spec.Decision.Mode != embedopsv1.CacheModeShared:
			continue
		}
		if err := r.client.Create(ctx, sharedClaim(binding, name), client.FieldOwner(embedopsv1.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating claim %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("created cache claim", "binding", binding.Name, "claim", name)
	}
	return claims, nil
}

// reportDrift sets ConfigurationDrift from the StorageClass and the claims,
// with a Warning event when it appears. It never deletes anything.
func (r *ModelCacheBindingReconciler) reportDrift(ctx context.Context, binding *embedopsv1.ModelCacheBinding, claims []corev1.PersistentVolumeClaim) error {
	class, err := storageClassOf(ctx, r.client, binding.Spec.Decision.StorageClassName)
	if err != nil {
		return err
	}
	var found *drift
	if class != nil {
		found = storageClassDrift(binding, class.Provisioner, class.Parameters)
	}
	if found == nil {
		found = claimSizeDrift(binding, claims)
	}
	if found == nil {
		conditions.MarkFalse(binding, embedopsv1.ConfigurationDriftCondition, embedopsv1.ValidReason, "the cluster matches the recorded decision")
		return nil
	}
	if !conditions.IsTrue(binding, embedopsv1.ConfigurationDriftCondition) || conditions.GetReason(binding, embedopsv1.ConfigurationDriftCondition) != found.reason {
		r.events.Eventf(binding, nil, corev1.EventTypeWarning, found.reason, "Reconcile", "%s", found.message)
	}
	conditions.MarkTrue(binding, embedopsv1.ConfigurationDriftCondition, found.reason, "%s", found.message)
	return nil
}

// storageClassOf reads the named StorageClass, or the cluster default for
// "". It returns nil when there is none.
func storageClassOf(ctx context.Context, reader client.Reader, name string) (*storagev1.StorageClass, error) {
	if name != "" {
		class := &storagev1.StorageClass{}
		err := reader.Get(ctx, types.NamespacedName{Name: name}, class)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading StorageClass %s: %w", name, err)
		}
		return class, nil
	}
	var classes storagev1.StorageClassList
	if err := reader.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing StorageClasses: %w", err)
	}
	for i := range classes.Items {
		if classes.Items[i].Annotations[defaultStorageClassAnnotation] == "true" {
			return &classes.Items[i], nil
		}
	}
	return nil, nil
}

// bindingsOfStorageClass maps a StorageClass to the bindings that record it.
func (r *ModelCacheBindingReconciler) bindingsOfStorageClass(ctx context.Context, class client.Object) []reconcile.Request {
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.client.List(ctx, &bindings); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the bindings of a StorageClass", "storageClass", class.GetName())
		return nil
	}
	var requests []reconcile.Request
	for i := range bindings.Items {
		name := bindings.Items[i].Spec.Decision.StorageClassName
		if name == class.GetName() || (name == "" && class.GetAnnotations()[defaultStorageClassAnnotation] == "true") {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&bindings.Items[i])})
		}
	}
	return requests
}
