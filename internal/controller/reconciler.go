package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	fluxcontroller "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/predicates"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/controller/act"
	"github.com/embedops/embedops/internal/controller/diagnose"
	"github.com/embedops/embedops/internal/controller/endpoint"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/controller/metrics"
	"github.com/embedops/embedops/internal/controller/writes"
	"github.com/embedops/embedops/internal/provenance"
)

// DefaultProgressInterval is how often a server whose pods are not ready yet
// is looked at again when no watch event arrives first.
const DefaultProgressInterval = 30 * time.Second

// DefaultEndpointInterval is how often an Available server's /info is asked
// again when the endpoint check is on.
const DefaultEndpointInterval = time.Minute

// DefaultClusterDomain is the cluster's DNS domain when none is configured,
// kubelet's and kubeadm's default.
const DefaultClusterDomain = "cluster.local"

// EmbeddingServerReconcilerOptions configure the EmbeddingServer reconciler.
type EmbeddingServerReconcilerOptions struct {
	// MaxConcurrentReconciles is how many servers are reconciled at once;
	// 0 means one.
	MaxConcurrentReconciles int
	// RateLimiter spaces the retries of failed reconciles; nil means
	// controller-runtime's default.
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
	// ProgressInterval is how long to wait before looking again at a server
	// whose pods are not ready; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
	// EndpointCheck asks the pods of an Available server for TEI's /info
	// through its Service; off where the controller cannot reach Services
	// (see endpoint.ResolveCheck).
	EndpointCheck bool
	// EndpointClient asks /info; nil means endpoint.NewClient(nil).
	EndpointClient endpoint.Client
	// EndpointInterval is how long to wait before asking an Available
	// server's /info again; 0 means DefaultEndpointInterval.
	EndpointInterval time.Duration
	// PopulatorImage runs `embedops populate` as an init container of
	// PerReplica pods, which then start TEI offline; it should be the
	// controller's own image. Empty means TEI downloads the model itself and
	// ModelReady is not reported.
	PopulatorImage string
	// ArgoCDNamespace is Argo CD's own namespace, where Applications named
	// without one live; empty means provenance.DefaultArgoCDNamespace.
	ArgoCDNamespace string
	// ClusterDomain is the cluster's DNS domain, the suffix of status.url;
	// empty means DefaultClusterDomain.
	ClusterDomain string
	// EndpointProber selects the controller's own pods, which a server's
	// NetworkPolicy admits to the HTTP port while the endpoint check is on
	// (see endpoint.Prober); nil admits none.
	EndpointProber *networkingv1.NetworkPolicyPeer
	// PopulateDeadline bounds each populate Job (activeDeadlineSeconds);
	// 0 means none.
	PopulateDeadline time.Duration
	// Now is the clock spec.progressDeadline and the populate retry are
	// measured with; nil means time.Now.
	Now func() time.Time
}

// EmbeddingServerReconciler runs TEI servers: it applies each
// EmbeddingServer's StatefulSet and Services and reports their state. Its
// zero value is set up by SetupWithManager.
type EmbeddingServerReconciler struct {
	// client reads from the informer cache; the reconciler's writes go
	// through act (and the ledger): it holds no client that writes.
	client    client.Reader
	apiReader client.Reader
	scheme    *runtime.Scheme
	events    events.Recorder
	metrics   fluxcontroller.Metrics
	act       *act.Writer
	ledger    *ledger.Ledger
	rollouts  rollouts
	verified  verifiedChildren
	// upgrades holds each server's last restoreUpgrades answer
	// (upgradeAnswer), by server UID.
	upgrades sync.Map
	// provisioning holds when each clone claim was first seen handed to
	// its provisioner (provisioningSince), by claim UID.
	provisioning sync.Map
	writes       writes.Versions
	// servers reads and patches servers, never from a cache behind writes.
	servers          act.RecordingWriter
	provenance       *provenance.Resolver
	progressInterval time.Duration
	endpointCheck    bool
	endpoint         endpoint.Client
	endpointInterval time.Duration
	populatorImage   string
	clusterDomain    string
	prober           *networkingv1.NetworkPolicyPeer
	populateDeadline time.Duration
	primaryFamily    primaryFamily
	now              func() time.Time
}

// serverScope is what the phases of one reconcile share.
type serverScope struct {
	// server is the object being reconciled; phases change its status.
	server *embedopsv1.EmbeddingServer
	// observed is what the cache showed of the server; set by observe,
	// the first phase, and only read after it.
	observed *observed
	// readyBefore and phaseBefore are the fetched Ready condition and phase,
	// so events mark transitions only.
	readyBefore *metav1.Condition
	phaseBefore embedopsv1.ServerPhase
	// inventoryBefore is the fetched inventory, the base of pruning.
	inventoryBefore *embedopsv1.ResourceInventory
	// resolvedCommit is the model commit the binding in use recorded, empty
	// when unknown; set by reportBinding and recordRealized.
	resolvedCommit string
	// children are the desired children, built by buildChildren.
	children []*unstructured.Unstructured
	// service is the desired client Service, the source of status.url.
	service *corev1.Service
	// statefulSet is the StatefulSet as reconcileReadiness read it, nil
	// when it does not exist; its replica counts are the server's progress.
	statefulSet *appsv1.StatefulSet
	// statefulSetName names the StatefulSet of the desired pod template;
	// set by buildChildren (see statefulSetNameFor).
	statefulSetName string
	// statefulSets are the StatefulSets the server controls, as observe
	// saw them.
	statefulSets []appsv1.StatefulSet
	// rollout is the storage change in progress, nil when only the desired
	// StatefulSet exists; set by planChildren.
	rollout *storageRollout
	// facts are what the children depend on beyond the spec; set by
	// factsOf.
	facts *builder.Facts
	// cache is the model cache of the binding in use, nil for mode None;
	// set by reportBinding.
	cache *builder.Cache
	// binding is the binding in use, nil for mode None; set by
	// reportBinding.
	binding *embedopsv1.ModelCacheBinding
	// halted stops the remaining phases: a phase is waiting, and said on
	// what in the conditions.
	halted bool
	// childrenVerified: the cache shows every child as the last unchanged
	// apply found it (checkOwnership); the ownership check moved to apply.
	childrenVerified bool
	// liveVersions are the children's resourceVersions by inventory ID as
	// the uncached ownership check read them; nil when it was skipped.
	liveVersions map[string]string
	// absent are the inventory IDs of the children the uncached ownership
	// check found free: they are created by a direct apply (createChildren).
	absent map[string]bool
	// created are the children createChildren applied, as the API server
	// answered, by inventory ID.
	created map[string]*unstructured.Unstructured
	// stalled: a phase is waiting for a human (Stalled is set) and polls,
	// since what it waits on is not watched.
	stalled bool
	// plan is what the phases of the current round decided the act step
	// (carryOut) writes.
	plan serverPlan
	// bound is the ledger's answer to the plan's bindRequest; nil for
	// cache mode None.
	bound *bindAnswer
	// patcher writes the server: the finalizer at once, the status at the
	// end of the reconcile.
	patcher *act.ServerPatcher
	// readLive: server is the API server's answer to a write of this
	// reconcile (the finalizer), as live as an uncached read.
	readLive bool
	// expansionRefused is how many claims the API server refused to
	// expand (ledger.ExpandClaims), for CacheReady.
	expansionRefused int
	// modelReport is what the pods' populate init containers report, nil
	// when none does; set by planRealized.
	modelReport *modelReport
	// claimsWait is a pod that cannot be scheduled until its claims bind,
	// set by reconcileDiagnostics: Ready stays Initializing, and the
	// progress deadline applies to it (reconcileProgress).
	claimsWait *diagnose.Diagnosis
}

// phase is one step of a reconcile. It changes the scope's server status and
// returns an error to stop the reconcile, or a requeue to wait.
type phase struct {
	name string
	run  func(context.Context, *serverScope) (ctrl.Result, error)
}

// SetupWithManager wires the reconciler into mgr: clients, the shared event
// recorder and ledger, metrics and the watches.
func (r *EmbeddingServerReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, recorder events.Recorder, l *ledger.Ledger, opts EmbeddingServerReconcilerOptions) error {
	r.client, r.apiReader, r.scheme, r.events, r.ledger = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetScheme(), recorder, l
	r.servers = act.NewRecordingWriter(mgr.GetClient(), r.apiReader, &r.writes, true)
	servers, err := mgr.GetCache().GetInformer(ctx, &embedopsv1.EmbeddingServer{})
	if err != nil {
		return err
	}
	if _, err := servers.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { r.servers.ForgetCaughtUp(obj) },
		DeleteFunc: r.servers.ForgetCaughtUp,
	}); err != nil {
		return err
	}
	r.metrics = fluxcontroller.NewMetrics(mgr, metrics.Readiness, embedopsv1.ServerFinalizer)
	r.act = act.NewWriter(mgr.GetClient())
	r.provenance = &provenance.Resolver{Reader: mgr.GetAPIReader(), ArgoCDNamespace: opts.ArgoCDNamespace}
	r.now = opts.Now
	if r.now == nil {
		r.now = time.Now
	}
	r.progressInterval = opts.ProgressInterval
	if r.progressInterval <= 0 {
		r.progressInterval = DefaultProgressInterval
	}
	r.endpointCheck, r.endpoint = opts.EndpointCheck, opts.EndpointClient
	if r.endpoint == nil {
		r.endpoint = endpoint.NewClient(nil)
	}
	r.endpointInterval = opts.EndpointInterval
	r.populatorImage = opts.PopulatorImage
	r.prober, r.populateDeadline = opts.EndpointProber, opts.PopulateDeadline
	domain, err := clusterDomain(opts.ClusterDomain)
	if err != nil {
		return err
	}
	r.clusterDomain = domain
	if r.endpointInterval <= 0 {
		r.endpointInterval = DefaultEndpointInterval
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&embedopsv1.EmbeddingServer{}, ctrlbuilder.WithPredicates(
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(serverOfPod)).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.serversOfPopulateJob)).
		Watches(&embedopsv1.ModelCacheBinding{}, handler.EnqueueRequestsFromMapFunc(serversOfBinding),
			ctrlbuilder.WithPredicates(bindingReadyChanged())).
		WithOptions(ctrlcontroller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             opts.RateLimiter,
		}).
		Complete(r)
}

// Reconcile applies one EmbeddingServer's children and reports their state.
func (r *EmbeddingServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	server, err := r.readServer(ctx, req.NamespacedName)
	if server == nil || err != nil {
		return ctrl.Result{}, err
	}
	defer r.metrics.RecordDuration(ctx, server, start)
	r.metrics.RecordSuspend(ctx, server, server.Spec.Suspend)

	// A suspended server is left alone, status included, until it is deleted.
	if server.Spec.Suspend && server.DeletionTimestamp.IsZero() {
		ctrl.LoggerFrom(ctx).V(1).Info("reconciliation is suspended")
		return ctrl.Result{}, nil
	}

	scope := newServerScope(server)
	patcher := act.NewServerPatcher(server, r.servers, r.apiReader, ownedConditions)
	scope.patcher = patcher
	defer func() {
		retErr = r.finalizeStatus(ctx, scope, patcher, retErr)
	}()

	if !server.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, scope)
	}
	return r.observePlanActReport(ctx, scope)
}

// observePlanActReport runs a reconcile: rounds of phases that read and
// plan, each followed by the act step that writes their plan (carryOut),
// then the phases that only report. A round ends where the next decision
// needs a write's answer, so the writes and the decisions keep the order
// of a reconcile that wrote as it went: the finalizer before anything
// else; the binding the ledger chose, which the rest is built from; the
// claims as their label patch and expansion left them, which CacheReady
// reads; the commit a populate Job resolved, which the pods run; the
// children as applied, which readiness waits on; the binding's record of
// what the pods realized, before ModelReady reports it. A phase that
// stops the reconcile or fails ends it after its round's act step, which
// writes what the round planned; the later rounds run only when none did.
func (r *EmbeddingServerReconciler) observePlanActReport(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	rounds := [][]phase{
		{{"observe", r.observe}, {"scale", r.reportScale}, {"finalizer", r.reconcileFinalizer}},
		{{"request", r.reconcileRequest}, {"accept", r.reconcileAccepted}, {"ownership", r.checkOwnership}, {"binding", r.reconcileBinding}},
		{{"bound", r.reportBinding}},
		{{"cache", r.reportCache}, {"populate", r.reconcilePopulate}},
		{{"populated", r.reportPopulated}, {"build", r.buildChildren}, {"plan", r.planChildren}},
		{{"readiness", r.reconcileReadiness}, {"realized", r.planRealized}},
	}
	return r.runRounds(ctx, scope, rounds, []phase{
		{"model", r.reconcileModel},
		{"endpoint", r.reconcileEndpoint},
		{"diagnostics", r.reconcileDiagnostics},
		{"progress", r.reconcileProgress},
	})
}

// runRounds runs each round's phases, then the act step (carryOut), and,
// when no phase stopped the reconcile or failed, the reporting phases. It
// returns the soonest requeue asked for.
func (r *EmbeddingServerReconciler) runRounds(ctx context.Context, scope *serverScope, rounds [][]phase, report []phase) (ctrl.Result, error) {
	var result ctrl.Result
	for _, planning := range rounds {
		planned, planErr := r.runPhases(ctx, scope, planning)
		acted, actErr := r.runPhase(ctx, scope, phase{"act", r.carryOut})
		if err := roundError(planErr, actErr); err != nil {
			return ctrl.Result{}, err
		}
		result = sooner(sooner(result, planned.RequeueAfter), acted.RequeueAfter)
		if scope.halted {
			return result, nil
		}
	}
	reported, err := r.runPhases(ctx, scope, report)
	if err != nil {
		return ctrl.Result{}, err
	}
	return sooner(result, reported.RequeueAfter), nil
}

// roundError is a round's error: the planning's or the act step's, as
// it is (a reconcile.TerminalError stays one); when both failed, the act
// step's, which is retried, naming the planning's.
func roundError(planErr, actErr error) error {
	switch {
	case actErr == nil:
		return planErr
	case planErr == nil:
		return actErr
	}
	// Only the act step's is wrapped: a terminal planning error must not
	// stop the retry of a write that failed.
	return fmt.Errorf("%w (planning failed too: %s)", actErr, planErr.Error())
}

// readServer reads the server from the cache, or from the API server when
// the cache is behind this process's last write (see writes.Versions); nil
// when it is gone.
func (r *EmbeddingServerReconciler) readServer(ctx context.Context, key types.NamespacedName) (*embedopsv1.EmbeddingServer, error) {
	server := &embedopsv1.EmbeddingServer{}
	err := r.servers.Get(ctx, key, server)
	if apierrors.IsNotFound(err) {
		r.writes.Forget(key)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return server, nil
}

// newServerScope remembers what the phases compare against.
func newServerScope(server *embedopsv1.EmbeddingServer) *serverScope {
	return &serverScope{
		server:          server,
		readyBefore:     conditions.Get(server, embedopsv1.ReadyCondition).DeepCopy(),
		phaseBefore:     server.Status.Phase,
		inventoryBefore: server.Status.Inventory.DeepCopy(),
	}
}

// runPhases runs the phases in order, stopping at the first error or halt, and
// returns the soonest requeue any of them asked for.
func (r *EmbeddingServerReconciler) runPhases(ctx context.Context, scope *serverScope, phases []phase) (ctrl.Result, error) {
	var result ctrl.Result
	for _, p := range phases {
		res, err := r.runPhase(ctx, scope, p)
		if err != nil {
			return ctrl.Result{}, err
		}
		result = sooner(result, res.RequeueAfter)
		if scope.halted {
			break
		}
	}
	return result, nil
}

// runPhase runs one phase and records its duration.
func (r *EmbeddingServerReconciler) runPhase(ctx context.Context, scope *serverScope, p phase) (ctrl.Result, error) {
	start := time.Now()
	defer metrics.ObservePhase(p.name, start)
	return p.run(ctx, scope)
}

// sooner is result with its requeue moved to after, when after is
// positive and sooner than the requeue asked for.
func sooner(result ctrl.Result, after time.Duration) ctrl.Result {
	if after > 0 && (result.RequeueAfter == 0 || after < result.RequeueAfter) {
		result.RequeueAfter = after
	}
	return result
}

// serverOfPod maps a pod to the server named by its owner labels.
func serverOfPod(_ context.Context, pod client.Object) []reconcile.Request {
	labels := pod.GetLabels()
	name, namespace := labels[embedopsv1.NameLabel], labels[embedopsv1.NamespaceLabel]
	if name == "" || namespace != pod.GetNamespace() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}

// reconcileFinalizer plans the finalizer that holds the server until its
// children are removed and its binding references are gone. The act step
// writes it first, before the ledger references any binding, so a server
// deleted (or a controller killed) in between can never leave a reference
// nobody removes; the reconcile goes on from the API server's answer,
// whose status it writes once at its end (Flux's controllers end the
// reconcile here and write a Reconciling status first: one write more per
// server).
func (r *EmbeddingServerReconciler) reconcileFinalizer(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	scope.plan.finalizer = !controllerutil.ContainsFinalizer(scope.server, embedopsv1.ServerFinalizer)
	return ctrl.Result{}, nil
}

// reconcileRequest records the handled reconcile.fluxcd.io/requestedAt
// token, so `flux reconcile`-style tools see their request answered.
func (r *EmbeddingServerReconciler) reconcileRequest(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	if token, ok := meta.ReconcileAnnotationValue(scope.server.GetAnnotations()); ok {
		scope.server.Status.SetLastHandledReconcileRequest(token)
	}
	return ctrl.Result{}, nil
}
