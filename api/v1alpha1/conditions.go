package v1alpha1

import "github.com/fluxcd/pkg/apis/meta"

// Condition types. Ready, Reconciling and Stalled follow kstatus.
const (
	// ReadyCondition summarises the object: for a server, all desired
	// replicas ready and children applied.
	ReadyCondition = meta.ReadyCondition
	// ReconcilingCondition means work is in progress.
	ReconcilingCondition = meta.ReconcilingCondition
	// StalledCondition means progress needs a human.
	StalledCondition = meta.StalledCondition
	// AcceptedCondition means the spec is valid and its references resolve.
	AcceptedCondition = "Accepted"
	// ModelReadyCondition means the weights are in the cache and loadable.
	ModelReadyCondition = "ModelReady"
	// CacheReadyCondition means the binding is Active and its claims Bound.
	CacheReadyCondition = "CacheReady"
	// SourceResolvedCondition says whether the git revision of the server's
	// cache decision was found. It is informational: provenance problems
	// never stall a server.
	SourceResolvedCondition = "SourceResolved"
	// ConfigurationDriftCondition means the cluster no longer matches a
	// binding's recorded cluster facts. It never authorises deletion.
	ConfigurationDriftCondition = "ConfigurationDrift"
	// OutOfRoomCondition means a binding's claims, taken over from its
	// predecessor, have no room for its revision: no server uses it again,
	// and the server that did moves to storage of its own.
	OutOfRoomCondition = "OutOfRoom"
)

// Condition reasons; an event's reason equals the condition reason.
const (
	// AvailableReason: all desired replicas are ready.
	AvailableReason = "Available"
	// InitializingReason: children are applied, pods are not ready yet.
	InitializingReason = "Initializing"
	// ScaledToZeroReason: the server runs no replicas by request.
	ScaledToZeroReason = "ScaledToZero"
	// DownloadingReason: the model is being downloaded.
	DownloadingReason = "Downloading"
	// DownloadedReason: the model is in the cache.
	DownloadedReason = "Downloaded"
	// DownloadFailedReason: the model download failed.
	DownloadFailedReason = "DownloadFailed"
	// ProgressingReason: a reconcile is in progress.
	ProgressingReason = meta.ProgressingReason
	// ProgressingWithRetryReason: a reconcile failed and is being retried.
	ProgressingWithRetryReason = meta.ProgressingWithRetryReason
	// ConfigurationInvalidReason: the spec cannot be turned into children.
	ConfigurationInvalidReason = "ConfigurationInvalid"
	// SecretNotFoundReason: the token Secret or its key does not exist.
	SecretNotFoundReason = "SecretNotFound"
	// CABundleNotFoundReason: the CA bundle's ConfigMap or Secret, or its
	// key, does not exist.
	CABundleNotFoundReason = "CABundleNotFound"
	// ClaimNotFoundReason: spec.cache.existingClaim names no claim.
	ClaimNotFoundReason = "ClaimNotFound"
	// ClaimNotBoundReason: spec.cache.existingClaim is not Bound to a volume.
	ClaimNotBoundReason = "ClaimNotBound"
	// ModelNotInClaimReason: spec.cache.existingClaim lacks the model at its
	// revision (refs/<revision> or snapshots/<commit>), as the verify Job found.
	ModelNotInClaimReason = "ModelNotInClaim"
	// ValidReason: the spec is valid and its references resolve.
	ValidReason = "Valid"
	// InvalidReason: the spec is invalid.
	InvalidReason = "Invalid"
	// BoundReason: the binding is Active and its claims are Bound.
	BoundReason = "Bound"
	// PendingReason: the binding's claims are not Bound yet.
	PendingReason = "Pending"
	// BindingRetiringReason: the binding is retiring; a new one is needed.
	BindingRetiringReason = "BindingRetiring"
	// OwnershipConflictReason: a child's name is taken by an object embedops
	// does not own.
	OwnershipConflictReason = "OwnershipConflict"
	// EndpointUnavailableReason: ready pods do not answer TEI's /info.
	EndpointUnavailableReason = "EndpointUnavailable"
	// ServedRevisionMismatchReason: TEI serves another revision than it was
	// started with (the binding's resolved commit, or the spec's revision).
	ServedRevisionMismatchReason = "ServedRevisionMismatch"
	// ServedModelMismatchReason: TEI serves another model than
	// spec.model.name.
	ServedModelMismatchReason = "ServedModelMismatch"
	// ResolvedCommitMismatchReason: pods resolved the model revision to
	// another commit than the binding recorded; the record is kept.
	ResolvedCommitMismatchReason = "ResolvedCommitMismatch"
	// SuspendedReason: reconciliation is suspended.
	SuspendedReason = "Suspended"
	// ImagePullBackOffReason: a pod cannot pull its image and backs off.
	ImagePullBackOffReason = "ImagePullBackOff"
	// ErrImagePullReason: a pod failed to pull its image.
	ErrImagePullReason = "ErrImagePull"
	// CrashLoopBackOffReason: a container keeps crashing.
	CrashLoopBackOffReason = "CrashLoopBackOff"
	// CreateContainerConfigErrorReason: a container's config cannot be built,
	// e.g. a referenced Secret key is missing.
	CreateContainerConfigErrorReason = "CreateContainerConfigError"
	// OOMKilledReason: a container was killed for exceeding its memory limit.
	OOMKilledReason = "OOMKilled"
	// UnschedulableReason: a pod cannot be scheduled.
	UnschedulableReason = "Unschedulable"
	// StorageClassDriftReason: the StorageClass changed after the decision.
	StorageClassDriftReason = "StorageClassChanged"
	// SourceUnknownReason: a cache decision was recorded with no git revision.
	SourceUnknownReason = "SourceUnknown"
	// SourceResolvedReason: the decision's source names a git commit.
	SourceResolvedReason = "Resolved"
	// SourcePendingReason: the GitOps tool had not finished applying the
	// server when the decision was recorded; what it was applying is kept.
	SourcePendingReason = "SourcePending"
	// DeclaredRevisionIgnoredReason: the server's source-revision
	// annotation names another revision than the GitOps tool applied; the
	// tool's is recorded (a Warning event, never a condition).
	DeclaredRevisionIgnoredReason = "DeclaredRevisionIgnored"
	// InvalidRevisionReason: the revision found cannot be parsed; it is
	// recorded as written, with no commit.
	InvalidRevisionReason = "InvalidRevision"
	// SourceNotFoundReason: the server names a Kustomization or Application
	// that does not exist, or whose kind is not installed.
	SourceNotFoundReason = "SourceNotFound"
	// NotGitSourceReason: the manifest came from a Helm chart repository, so
	// the decision cannot be re-derived from git.
	NotGitSourceReason = "NotGitSource"
	// RenderInputsTooLargeReason: the GitOps object's render settings are
	// too large to record; the decision cannot be re-rendered exactly.
	RenderInputsTooLargeReason = "RenderInputsTooLarge"
	// MovingToNewStorageReason: a change of the cache decision needs new
	// volumes; the pods move to a new StatefulSet on them, surge first (an
	// Event of the server).
	MovingToNewStorageReason = "MovingToNewStorage"
	// RolloutWaitingForUnreadyReason: a storage change waits because an old
	// pod that does not serve sits between ready ones, which a StatefulSet
	// cannot remove first, and taking a ready pod would leave fewer ready
	// than the disruption budget keeps (Ready's reason and a Warning event).
	RolloutWaitingForUnreadyReason = "RolloutWaitingForUnready"
	// ClaimExpandingReason: a binding raised a claim's storage request to
	// its decision's size, in place (an Event of the binding).
	ClaimExpandingReason = "ClaimExpanding"
	// ClaimExpansionFailedReason: the API server refused to expand a claim
	// (an Event of the binding).
	ClaimExpansionFailedReason = "ClaimExpansionFailed"
	// ClaimResizedReason: a cache claim was resized by hand.
	ClaimResizedReason = "ClaimResized"
	// StorageClassDeletedReason: the StorageClass recorded by a binding was
	// deleted after the decision.
	StorageClassDeletedReason = "StorageClassDeleted"
)

// Reasons of a ModelCacheBinding's Ready condition and of the Events of its
// data-affecting transitions; an event's reason is the condition's.
const (
	// CreatedReason: a binding recorded a new cache decision.
	CreatedReason = "Created"
	// RetiringReason: the binding's retention ended; its claims are being
	// deleted.
	RetiringReason = "Retiring"
	// ClaimDeletedReason: a retiring binding deleted one of its claims.
	ClaimDeletedReason = "ClaimDeleted"
	// SnapshotDeletedReason: a binding deleted one of its VolumeSnapshots.
	SnapshotDeletedReason = "SnapshotDeleted"
	// SnapshotNotOwnedReason: a VolumeSnapshot named by a binding is not
	// controlled by it, and is left alone.
	SnapshotNotOwnedReason = "SnapshotNotOwned"
	// ClaimNotOwnedReason: a claim named by a binding is not the binding's
	// (no owner reference, no binding label) and is left alone.
	ClaimNotOwnedReason = "ClaimNotOwned"
	// ReleasedReason: the binding's data is released; it is kept as an audit
	// record.
	ReleasedReason = "Released"
	// PrunedReason: a Released binding beyond the history limit was deleted.
	PrunedReason = "Pruned"
	// SupersededReason: a binding whose decision changed in retainFor alone
	// handed its claims to its successor and was Released without deleting
	// any.
	SupersededReason = "Superseded"
	// NoSpaceLeftReason: a populator found no space left on a claim the
	// binding took over (ENOSPC); OutOfRoom is True, and its server moves
	// to new storage (an Event of the binding and of the server).
	NoSpaceLeftReason = "NoSpaceLeft"
	// RevisionTooLargeReason: the revision the binding's resolve Job listed,
	// with its headroom, exceeds the room its predecessor's claims
	// reported; OutOfRoom is True before any pod rolls.
	RevisionTooLargeReason = "RevisionTooLarge"
)
