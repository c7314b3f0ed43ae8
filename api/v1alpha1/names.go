package v1alpha1

// Finalizers, labels and annotations.
const (
	// ServerFinalizer holds a server until its children are cleaned up.
	ServerFinalizer = "embedops.dev/server"
	// CacheProtectionFinalizer holds a binding until it is Released.
	CacheProtectionFinalizer = "embedops.dev/cache-protection"
	// NameLabel and NamespaceLabel mark children with their owner.
	NameLabel = "embedops.dev/name"
	// NamespaceLabel is the owner's namespace on children.
	NamespaceLabel = "embedops.dev/namespace"
	// ServerUIDLabel is the UID of the server that created a binding; the
	// released history of a server is found and pruned by it.
	ServerUIDLabel = "embedops.dev/server-uid"
	// BindingBaseLabel is the unsuffixed name of a binding's decision, so the
	// successors of a retired binding are found by a label selector.
	BindingBaseLabel = "embedops.dev/binding"
	// CacheBindingLabel names, on a server's pods, the binding whose cache
	// they mount, so a pod of an older binding is never read as one of the
	// binding in use while a rollout replaces it.
	CacheBindingLabel = "embedops.dev/cache-binding"
	// PopulatesLabel names the binding whose Shared claim a populate Job
	// and its pod fill.
	PopulatesLabel = "embedops.dev/populates"
	// ShardLabel is Flux's sharding key: a controller started with
	// --watch-label-selector=sharding.fluxcd.io/key=<shard> reconciles the
	// servers carrying <shard>, and the bindings it creates carry it too.
	ShardLabel = "sharding.fluxcd.io/key"
	// SourceRevisionAnnotation declares the git revision of a manifest.
	SourceRevisionAnnotation = "embedops.dev/source-revision"
	// SourceRepositoryAnnotation declares the git repository of a manifest.
	SourceRepositoryAnnotation = "embedops.dev/source-repository"
	// SourcePathAnnotation declares the path of a manifest in its repository.
	SourcePathAnnotation = "embedops.dev/source-path"
	// FieldManager is the server-side apply field manager of the controller.
	FieldManager = "embedops-controller"
	// StatusFieldManager is the field manager of status writes.
	StatusFieldManager = "embedops-controller-status"
)

// The schema version the CRDs carry in SchemaVersionAnnotation (the
// kubebuilder:metadata:annotations marker of each kind). Bump both together
// whenever a field is added, so that a controller never runs over CRDs that
// would drop what it writes: an upgrade may leave the CRDs behind (a chart
// with crds.enabled=false, or one whose CRDs are in crds/, which Helm never
// upgrades), and under server-side field validation Warn
// the API server drops a field its CRD lacks.
const (
	// SchemaVersionAnnotation holds a CRD's schema version.
	SchemaVersionAnnotation = "embedops.dev/schema-version"
	// SchemaVersion is the schema version of this package's CRDs: 2 added
	// spec.rollout, 3 status.realized.freeBytes and reclaimableBytes, 4
	// lets those two follow the replicas' latest results (a CRD of 3
	// refuses the controller's updates of them), 5 spec.cache.seed and
	// the binding's status.claimFills, 6 seed Snapshot,
	// spec.cache.volumeSnapshotClassName and the binding's
	// spec.resources.volumeSnapshotNames.
	SchemaVersion = 6
	// UnversionedSchema is the schema version of CRDs installed before the
	// annotation existed (release 7c1c4b3 and earlier), whose schema is
	// version 1's.
	UnversionedSchema = 1
)
