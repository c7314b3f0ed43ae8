package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/internal/provenance"
)

// reconcileBinding finds or creates the binding of the server's cache
// decision and references it; leaveStaleBindings leaves the others once the
// children no longer use them. Mode None has no binding. It sets the cache
// the children are built with.
func (r *EmbeddingServerReconciler) reconcileBinding(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	d, err := decision.For(server)
	if err != nil {
		if errors.Is(err, decision.ErrInvalidSpec) {
			return ctrl.Result{}, r.refuseSpec(scope, err)
		}
		return ctrl.Result{}, err
	}
	if d == nil {
		conditions.Delete(server, embedopsv1.CacheReadyCondition)
		server.Status.CacheBinding = ""
		return ctrl.Result{}, nil
	}
	binding, err := r.bindingFor(ctx, server, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.useBinding(ctx, server, binding, d); err != nil {
		if errors.Is(err, errServerGone) {
			ctrl.LoggerFrom(ctx).Info("not referencing a binding: the server is gone or being deleted")
			scope.halted = true
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	scope.cache = cacheOf(d, binding.Name, r.populatorImage)
	scope.binding = binding
	if binding.Status.Realized != nil {
		scope.resolvedCommit = binding.Status.Realized.ResolvedCommit
	}
	server.Status.CacheBinding = binding.Name
	return ctrl.Result{}, r.reportCacheReady(ctx, server, binding)
}

// bindingFor returns the Active binding of the decision: the one named
// decision.BindingName, else a suffixed one of the same decision, else a new
// one under the next free suffix. A Retiring or Released binding is never
// revived.
func (r *EmbeddingServerReconciler) bindingFor(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision) (*embedopsv1.ModelCacheBinding, error) {
	base := decision.BindingName(d)
	binding := &embedopsv1.ModelCacheBinding{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: server.Namespace, Name: base}, binding)
	switch {
	case err == nil && reusable(binding, d):
		return binding, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading binding %s: %w", base, err)
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.client.List(ctx, &bindings, client.InNamespace(server.Namespace), client.MatchingLabels{bindingBaseLabel: base}); err != nil {
		return nil, fmt.Errorf("listing the bindings of %s: %w", base, err)
	}
	next := 1
	if err == nil {
		next = 2
	}
	slices.SortFunc(bindings.Items, func(a, b embedopsv1.ModelCacheBinding) int {
		return bindingSuffix(base, a.Name) - bindingSuffix(base, b.Name)
	})
	for i := range bindings.Items {
		n := bindingSuffix(base, bindings.Items[i].Name)
		if n == 0 {
			continue
		}
		if reusable(&bindings.Items[i], d) {
			return &bindings.Items[i], nil
		}
		next = max(next, n+1)
	}
	if next > maxBindingSuffix {
		return nil, fmt.Errorf("binding %s has more than %d retired successors", base, maxBindingSuffix)
	}
	return r.createBinding(ctx, server, d, bindingNameAt(base, next))
}

// createBinding records the decision under name, with its source and the
// StorageClass's cluster facts. When the name is taken, the existing binding
// is used if it is Active with the same decision; otherwise the next
// reconcile looks further.
func (r *EmbeddingServerReconciler) createBinding(ctx context.Context, server *embedopsv1.EmbeddingServer, d *decision.Decision, name string) (*embedopsv1.ModelCacheBinding, error) {
	resolution, err := r.provenance.Resolve(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("resolving the source of the cache decision: %w", err)
	}
	source := resolution.Source
	recorded := d
	if class, err := storageClassOf(ctx, r.client, d.Decision.StorageClassName); err != nil {
		ctrl.LoggerFrom(ctx).Info("recording no cluster facts: the StorageClass is not readable", "error", err.Error())
	} else if class != nil {
		recorded = decision.WithClusterFacts(d, class.Provisioner, class.Parameters)
	}
	binding := newBinding(server, recorded, name, source)
	err = r.client.Create(ctx, binding, client.FieldOwner(embedopsv1.FieldManager))
	if err == nil {
		ctrl.LoggerFrom(ctx).Info("created binding", "binding", name, "method", source.Method, "revision", source.Revision)
		r.reportSource(server, name, resolution)
		return binding, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating binding %s: %w", name, err)
	}
	existing := &embedopsv1.ModelCacheBinding{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(binding), existing); err != nil {
		return nil, fmt.Errorf("reading binding %s: %w", name, err)
	}
	if !reusable(existing, d) {
		return nil, fmt.Errorf("binding %s exists for another decision or is %s", name, existing.Status.Phase)
	}
	return existing, nil
}

// newBinding is the binding of decision d named name, created by server.
func newBinding(server *embedopsv1.EmbeddingServer, d *decision.Decision, name string, source embedopsv1.DecisionSource) *embedopsv1.ModelCacheBinding {
	binding := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  server.Namespace,
			Name:       name,
			Labels:     map[string]string{bindingServerLabel: string(server.UID), bindingBaseLabel: decision.BindingName(d)},
			Finalizers: []string{embedopsv1.CacheProtectionFinalizer},
		},
		Spec: embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision, Source: source},
	}
	binding.Spec.Resources.PersistentVolumeClaimNames = claimNamesOf(server, d, name)
	return binding
}

// claimNamesOf are the claims a binding named name holds for the server
// now: the Shared claim named after the binding, or the PerReplica claims of
// the current replicas.
func claimNamesOf(server *embedopsv1.EmbeddingServer, d *decision.Decision, name string) []string {
	if d.Decision.Mode == embedopsv1.CacheModeShared {
		return []string{name}
	}
	return perReplicaClaimNames(claimTemplateNameOf(d, name), server.Name, server.GetReplicas())
}

// useBinding adds the server's reference while the binding is Active and
// adds the claim names of new replicas, with the resourceVersion it was
// read at; a Conflict there is returned and retried from a fresh read.
func (r *EmbeddingServerReconciler) useBinding(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, d *decision.Decision) error {
	if err := r.referenceBinding(ctx, server, binding); err != nil {
		return err
	}
	missing := missingNames(binding.Spec.Resources.PersistentVolumeClaimNames, claimNamesOf(server, d, binding.Name))
	if len(missing) == 0 {
		return nil
	}
	binding.Spec.Resources.PersistentVolumeClaimNames = append(binding.Spec.Resources.PersistentVolumeClaimNames, missing...)
	if err := r.client.Update(ctx, binding, client.FieldOwner(embedopsv1.FieldManager)); err != nil {
		return fmt.Errorf("adding claims to binding %s: %w", binding.Name, err)
	}
	return nil
}

// referenceBinding adds the server's reference while the binding is
// Active. A Conflict (the binding's own controller writes its first status
// at the same moment) is retried at once from a fresh read: returned, it
// would back the server off until the unreferenced binding retires.
func (r *EmbeddingServerReconciler) referenceBinding(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) error {
	if hasReference(binding, server.UID) {
		return nil
	}
	if err := r.confirmLive(ctx, server); err != nil {
		return err
	}
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(binding), binding); err != nil {
				return err
			}
		}
		first = false
		if hasReference(binding, server.UID) {
			return nil
		}
		if !isActive(binding) {
			return fmt.Errorf("binding %s became %s", binding.Name, binding.Status.Phase)
		}
		binding.Status.Phase = embedopsv1.BindingActive
		addReference(binding, serverReference(server))
		if err := r.client.Status().Update(ctx, binding, client.FieldOwner(embedopsv1.StatusFieldManager)); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("referenced binding", "binding", binding.Name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("adding the reference to binding %s: %w", binding.Name, err)
	}
	return nil
}

// errServerGone stops a reconcile working from a cached server that has
// been deleted: it must not reference a binding nobody would leave.
var errServerGone = errors.New("the server is gone or being deleted")

// confirmLive reads the server uncached before it references a binding:
// it must exist with this UID, hold the finalizer and not be deleting, so
// that its deletion is sure to go through reconcileDelete, which leaves the
// binding. The cache may still hold a server deleted a moment ago.
func (r *EmbeddingServerReconciler) confirmLive(ctx context.Context, server *embedopsv1.EmbeddingServer) error {
	live := &embedopsv1.EmbeddingServer{}
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(server), live)
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

// leaveStaleBindings leaves every binding but the one in use (all of them
// for mode None) once the children are applied and pruned, so a binding is
// never released while the StatefulSet still names its claims.
func (r *EmbeddingServerReconciler) leaveStaleBindings(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	keep := ""
	if scope.binding != nil {
		keep = scope.binding.Name
	}
	return ctrl.Result{}, r.leaveBindings(ctx, scope.server, keep)
}

// leaveBindings removes the server's reference from every binding of its
// namespace but keep. Bindings are listed from the API server, so a
// reference added moments ago is not missed.
func (r *EmbeddingServerReconciler) leaveBindings(ctx context.Context, server *embedopsv1.EmbeddingServer, keep string) error {
	var bindings embedopsv1.ModelCacheBindingList
	if err := r.apiReader.List(ctx, &bindings, client.InNamespace(server.Namespace)); err != nil {
		return fmt.Errorf("listing bindings: %w", err)
	}
	for i := range bindings.Items {
		binding := &bindings.Items[i]
		if binding.Name == keep || !hasReference(binding, server.UID) {
			continue
		}
		removeReference(binding, server.UID, r.now())
		if err := r.client.Status().Update(ctx, binding, client.FieldOwner(embedopsv1.StatusFieldManager)); err != nil {
			return fmt.Errorf("removing the reference from binding %s: %w", binding.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("left binding", "binding", binding.Name)
	}
	return nil
}

// reportCacheReady sets CacheReady from the binding's phase and its claims,
// read from the cache, which holds the labelled claims only.
func (r *EmbeddingServerReconciler) reportCacheReady(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) error {
	var claims corev1.PersistentVolumeClaimList
	if err := r.client.List(ctx, &claims, client.InNamespace(server.Namespace), client.MatchingLabels{embedopsv1.NamespaceLabel: server.Namespace}); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	byName := make(map[string]*corev1.PersistentVolumeClaim, len(claims.Items))
	for i := range claims.Items {
		byName[claims.Items[i].Name] = &claims.Items[i]
	}
	ready, reason, message := cacheReadiness(binding, byName)
	if ready {
		conditions.MarkTrue(server, embedopsv1.CacheReadyCondition, reason, "%s", message)
	} else {
		conditions.MarkFalse(server, embedopsv1.CacheReadyCondition, reason, "%s", message)
	}
	return nil
}

// reportSource sets SourceResolved from the resolution the new binding
// recorded, and tells which revision it was recorded at: a Normal event
// when the source names a commit, else one Warning per change of reason.
// Provenance never stalls a server.
func (r *EmbeddingServerReconciler) reportSource(server *embedopsv1.EmbeddingServer, binding string, res provenance.Resolution) {
	source := res.Source
	if res.Reason == "" {
		conditions.MarkTrue(server, embedopsv1.SourceResolvedCondition, embedopsv1.SourceResolvedReason,
			"cache decision %s recorded at %s (%s)", binding, source.Revision, source.Method)
		r.events.Eventf(server, nil, corev1.EventTypeNormal, embedopsv1.DecisionRecordedReason, "RecordDecision",
			"recorded cache decision %s at %s (%s)", binding, source.Revision, source.Method)
		return
	}
	changed := conditions.GetReason(server, embedopsv1.SourceResolvedCondition) != res.Reason
	conditions.MarkFalse(server, embedopsv1.SourceResolvedCondition, res.Reason,
		"cache decision %s recorded with method %s: %s", binding, source.Method, res.Message)
	if changed {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, res.Reason, "RecordDecision",
			"recorded cache decision %s with method %s: %s", binding, source.Method, res.Message)
	}
}
