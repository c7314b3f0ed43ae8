// Package controller holds embedops' reconcilers. It is the only package that
// writes to the API server.
//
// Invariants of the EmbeddingServer reconciler:
//   - Status is written once per reconcile, in a deferred patch.SerialPatcher
//     patch (conditions, then the rest of the status), by the field manager
//     embedopsv1.StatusFieldManager. observedGeneration is set when the
//     generation was fully handled: on success and on a terminal error.
//   - A reconcile ends in one of three ways: a wrapped error (retried), a
//     RequeueAfter with Ready=False and Reconciling=True (waiting for pods),
//     or reconcile.TerminalError with Stalled=True and a Warning event whose
//     reason is the condition's (the user must fix the spec, a referenced
//     Secret or a conflicting object).
//   - Children are applied with fluxcd/pkg/ssa under embedopsv1.FieldManager;
//     ssa's dry-run drift detection writes nothing when nothing changed. An
//     object is recreated only for a change the API server refuses in place,
//     and only after a dry-run shows it valid as a new object, so an invalid
//     spec never deletes a running StatefulSet.
//   - A child's name is used only when free or taken by an object with this
//     server's owner labels and no other controller; anything else is an
//     OwnershipConflictError and is never touched.
//   - Cache PersistentVolumeClaims are never pruned or deleted here: their
//     ModelCacheBinding releases them.
//   - Secret data is never cached, logged or emitted: Secrets are watched as
//     metadata without annotations, and a token Secret is read with an
//     uncached Get only to check that its key exists.
//   - status.phase is a pure function of the conditions (serverPhase).
//   - With the endpoint check on (ResolveEndpointCheck), an Available
//     server's Service must answer TEI's /info, else Ready=False
//     EndpointUnavailable and a requeue; status.served keeps the last
//     answer then, and is cleared only when the check is off or the server
//     is scaled to zero. A served commit other than the binding's
//     resolvedCommit leaves Ready True, with a ServedRevisionMismatch
//     Warning event when Ready's message did not note it yet.
//   - With a populator image (EmbeddingServerReconcilerOptions.PopulatorImage)
//     PerReplica pods run `embedops populate` as the init container
//     builder.PopulateContainerName and TEI starts offline. ModelReady is
//     read from that container's termination message only (modelReportOf);
//     the first result fills the binding's unset status.realized fields,
//     which are never overwritten: a pod reporting another commit is a
//     ResolvedCommitMismatch Warning event and a note in ModelReady.
//
// Invariants of the ModelCacheBinding lifecycle (DESIGN §4):
//   - A server adds its reference only to an Active binding, with a
//     Status().Update carrying the resourceVersion it read; a Retiring or
//     Released binding is never revived, the server gets a suffixed one.
//   - A binding moves to Retiring with the resourceVersion it was read at
//     with zero references, so a concurrent reference makes it a Conflict.
//     Binding status is therefore written with Update, not a patch.
//   - Claims are deleted only by a Retiring binding, with UID and
//     resourceVersion preconditions; drift never deletes anything.
//
// The RBAC markers below are the controller's whole permission set; `make
// manifests` turns them into config/rbac/role.yaml. Secrets are read as
// metadata and, for a referenced token key only, by get: never listed with
// their data, never written (RBAC cannot say "metadata only", so the role
// grants get, list and watch; the cache and client options keep to it).
// The leader lease is in config/rbac's namespaced Role, not here. Servers
// are never created or deleted by the controller, populate Jobs never
// changed.
//
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=embedops.dev,resources=modelcachebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers/status;modelcachebindings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers/finalizers;modelcachebindings/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;list;watch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch
package controller
