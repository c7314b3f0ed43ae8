// Package controller runs the EmbeddingServer reconciler, and registers it
// with the ModelCacheBinding reconciler (package binding) and their shared
// ledger on a manager (SetupReconcilers, Run). Its rooms:
//   - this package: the server reconcile, phase by phase (reconciler.go lists
//     them, observePlanActReport): observe reads what the cache shows of
//     the server once; rounds of phases plan what to write (serverPlan),
//     each followed by the act step (carryOut), which writes the round's
//     plan through act and the ledger; a round ends where the next decision
//     needs a write's answer (the finalizer, the binding, the claims, a
//     populate Job's commit, the applied children, the pods' record); then
//     the reporting phases set the rest of the status. No phase writes
//     (TestOnlyTheActStepWrites), a deleted server's reconcile included;
//   - act: every write of the server reconcile outside the ledger (its
//     children, populate Jobs, claims' labels, the finalizer and status);
//   - ledger: every write to a ModelCacheBinding and its claims;
//   - binding: the binding lifecycle's reconciler, which calls the ledger;
//   - endpoint: the /info client of the endpoint check;
//   - diagnose: why pods are not ready, read from their status;
//   - watch: what the process caches and watches (shards, leases);
//   - metrics: the collectors the controller serves;
//   - writes: the resourceVersions of this process's own writes.
//
// Only act, the ledger and internal/cleanup (the uninstall step) write to
// the API server: the reconcilers' own client is a client.Reader
// (TestOnlyActAndTheLedgerHoldWriters).
//
// Invariants of the EmbeddingServer reconciler:
//   - Status is written once per reconcile, in one deferred merge patch
//     (act.ServerPatcher: conditions and the rest of the status together, with
//     the read copy's resourceVersion as precondition; after a Conflict,
//     patch.SerialPatcher's conditions-then-status patches, which merge the
//     owned conditions into the latest copy), by the field manager
//     embedopsv1.StatusFieldManager. A new finalizer is patched first, by
//     the first act step of the first reconcile, which goes on from the
//     answer (no status is written for the finalizer alone). observedGeneration is set
//     when the
//     generation was fully handled: on success and on a terminal error.
//     The patch is a diff from the copy the reconcile started from, so that
//     copy is never older than this process's last write of the server: a
//     cached copy that is behind is read again uncached (writes.Versions).
//   - A reconcile ends in one of three ways: a wrapped error (retried), a
//     RequeueAfter with Ready=False and Reconciling=True (waiting for pods),
//     or reconcile.TerminalError with Stalled=True and a Warning event whose
//     reason is the condition's (the user must fix the spec). A child's
//     name taken by a foreign object and a missing token Secret (or key)
//     are the stalls that poll (Stalled=True, RequeueAfter): neither is
//     watched, so the server looks again every progress interval to
//     recover once it is fixed. Requeues carry jitter.
//   - At rest nothing runs on a timer: a server that is Ready asks for no
//     requeue, except the endpoint check's (EndpointInterval, when it is
//     on), whose reconcile reads only the cache and asks /info. Every
//     other RequeueAfter is a server or binding waiting on something (pods,
//     a populate Job, a stall that polls, retainFor), so idle servers cost
//     no CPU however many there are. Only a metrics scrape walks them, to
//     send their series (Flux's gotk_* gauges, and stateCollector's, which
//     it reads from the cache at scrape time without copying it).
//   - Children are applied with fluxcd/pkg/ssa under embedopsv1.FieldManager;
//     ssa's dry-run drift detection writes nothing when nothing changed.
//     A child the uncached ownership check found free is created by one
//     server-side apply of its own, without ssa's GET and dry run
//     (createChildren). While the spec builds the children the last apply
//     applied, that apply changed nothing but create children, and the
//     cache shows each child as that apply found or created it (status
//     aside), neither the drift check nor the ownership check is made
//     (verifiedChildren): every other change of a child is an event that
//     changes its cached copy and brings both back. Until the cache shows
//     the children that apply created (at most createdCacheWait), a
//     reconcile of the same generation stops at the ownership check and
//     writes nothing new: their arrival brings the server back. An
//     object is recreated only for a change the API server refuses in place,
//     and only after a dry-run shows it valid as a new object, so an invalid
//     spec never deletes a running StatefulSet.
//   - A child's name is used only when free or taken by an object with this
//     server's owner labels and no other controller; anything else is an
//     OwnershipConflictError, checked before any binding is made, and the
//     object is never touched.
//   - A PodDisruptionBudget exists only while the server wants two replicas
//     or more, and a NetworkPolicy only while spec.networkPolicy is set;
//     otherwise the inventory diff prunes them.
//   - Cache PersistentVolumeClaims are never pruned or deleted here: their
//     ModelCacheBinding releases them.
//   - Secret data is never cached, logged or emitted: Secrets are neither
//     cached nor watched (memory does not grow with the cluster's
//     Secrets), and a token Secret is read by name, uncached, only to check
//     that its key exists.
//   - status.phase is a pure function of the conditions (serverPhase).
//   - With the endpoint check on (endpoint.ResolveCheck), an Available
//     server's Service must answer TEI's /info, else Ready=False
//     EndpointUnavailable and a requeue; status.served keeps the last
//     answer then, and is cleared only when the check is off or the server
//     is scaled to zero. /info's model_sha is TEI's --revision as given, so
//     it is compared with the same (builder.ServedRevision: the binding's
//     resolvedCommit once a populator recorded it, else the spec's
//     revision; status.served says which), and model_id with
//     spec.model.name. A mismatch leaves Ready True, with a
//     ServedRevisionMismatch or ServedModelMismatch Warning event when
//     Ready's message did not note it yet. The API key (API_KEY or
//     --api-key) is read with an uncached Get when it is in a Secret, sent
//     as a bearer token, and never logged, recorded or put in an event.
//   - With a populator image (EmbeddingServerReconcilerOptions.PopulatorImage)
//     PerReplica pods run `embedops populate` as the init container
//     builder.PopulateContainerName, which downloads what the TEI image
//     reads; once the binding recorded the commit, TEI and the populator
//     run --revision=<commit> (builder.Cache.ResolvedCommit). A new binding
//     records it before its StatefulSet exists, from a resolve-only Job
//     (builder.ResolvesFirst, reconcilePopulate), so the pods start on the
//     commit and the StatefulSet rolls out once. ModelReady is
//     read from that container's termination message only (modelReportOf);
//     the first result fills the binding's unset status.realized fields,
//     which are never overwritten: a pod reporting another commit is a
//     ResolvedCommitMismatch Warning event and a note in ModelReady.
//
// Reads come from the informer cache, in one step, the first phase
// (observe: the named children, the StatefulSets and pods with the
// server's owner labels, the namespace's labelled claims); what a write of
// the reconcile changed is known from its answer, never from the cache.
// Later cached reads are of what no earlier write touched: the ledger's
// bindings, the chosen binding's populate Job, the bindings whyNewStorage
// names. A steady reconcile (nothing changed)
// therefore makes no request but the status patch acknowledging a
// reconcile.fluxcd.io/requestedAt (and the token Secret's Get, below),
// however many bindings and Released records the namespace holds. The
// uncached reads, each where a race or a missing watch needs it:
//   - the server, when the cache is behind this process's last write of it
//     (writes.Versions), for the status patch;
//   - each child's metadata (checkOwnershipUncached), unless
//     verifiedChildren shows nothing changed: a foreign object is not
//     cached, and a cached child of ours may have been deleted and its name
//     taken since the cache saw it; then, for a child that exists, ssa's GET
//     and dry-run PATCH (a child found free is created without them);
//   - the StatefulSet's metadata after an apply changed or replaced it, so
//     readiness waits for the cache to catch up (rollouts); a created one
//     is known from the apply's answer;
//   - in the ledger, when a PerReplica binding is created or a server comes
//     back to one it does not reference (a reverted decision): the
//     StatefulSet under the name its claims carry, so new storage never
//     takes the name of a StatefulSet that serves other storage
//     (placeBesideServing, usable; not when this reconcile's ownership
//     check found the name free);
//   - the token Secret and the API key Secret, by name: Secrets are not
//     cached;
//   - in the ledger: the server before a reference is added (confirmLive;
//     not when this reconcile's finalizer patch answered with it),
//     a binding whose reference this process removed or which it wrote
//     later than the cached copy, a binding name found taken on create,
//     the first listing of a server's bindings in this process (a previous
//     leader's last references may not be cached yet), and, only when a
//     binding's storage is handed to a successor, the bindings of that
//     chain and the claims whose controller reference moves, and, in a
//     shard (--watch-label-selector), the names of a new binding's
//     decision that other shards took;
//   - a populate Job's pods once it finished (their pods are not cached),
//     provenance (Flux and Argo CD objects) when a binding is created, and a
//     referencing server the cache does not know;
//   - a deleted server's children, each before it is deleted (deleteOwned),
//     and the server again when its finalizer's entry moved
//     (removeFinalizers);
//   - a server-side dry run of the StatefulSet of an earlier release that
//     lacks the drain or has the five-second /health liveness probe of the
//     releases before 672c32b, once per change of its generation or of the
//     desired pod template (restoreUpgrades).
//
// Sharding follows Flux's: with --watch-label-selector the controller lists
// and watches only the servers and bindings the selector matches
// (watch.CacheOptions), a binding carries its server's shard labels (ShardKeys),
// and the ledger writes no binding the selector does not match, however it
// was read. A binding whose server moved to another shard drops the
// server's reference in the binding's own shard.
//
// Every write to a ModelCacheBinding goes through one ledger.Ledger, shared
// by both reconcilers; the package ledger states the lifecycle's rules (the
// resourceVersion rule among them). status.cacheBinding names the binding
// whose claims the applied StatefulSet mounts, so it moves with the pods;
// the StatefulSet carries the binding's storage names (decision.StorageName),
// which a successor keeps, so a change of retainFor alone changes nothing
// the StatefulSet holds.
// Ready is True only once the StatefulSet's status is of the generation this
// process last applied and its update revision is rolled out (kstatus).
//
// The RBAC markers below are the controller's whole permission set; `make
// manifests` turns them into config/rbac/role.yaml. Secrets are read by
// name only (get): never listed, watched or written.
// The leader lease is in config/rbac's namespaced Role, not here. Servers
// are never created or deleted by the controller, populate Jobs never
// changed.
//
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=embeddingservers.embedops.dev;modelcachebindings.embedops.dev,verbs=get
// +kubebuilder:rbac:groups=embedops.dev,resources=modelcachebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers/status;modelcachebindings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=embedops.dev,resources=embeddingservers/finalizers;modelcachebindings/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshotclasses,verbs=get;list
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshots,verbs=get;create;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;list;watch
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch
package controller
