package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ModelCacheBindingKind is the kind of ModelCacheBinding objects.
const ModelCacheBindingKind = "ModelCacheBinding"

// ModelCacheBindingSpec records one cache decision. Identity, decision and
// source never change; the claim names only grow, so no claim the binding
// owns is ever forgotten.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.resources) || !has(oldSelf.resources.persistentVolumeClaimNames) || (has(self.resources) && has(self.resources.persistentVolumeClaimNames) && oldSelf.resources.persistentVolumeClaimNames.all(n, n in self.resources.persistentVolumeClaimNames))",message="spec.resources.persistentVolumeClaimNames may be added to, never removed from"
// +kubebuilder:validation:XValidation:rule="has(self.supersedes) == has(oldSelf.supersedes)",message="spec.supersedes is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.resources) && has(self.resources.storageName)) == (has(oldSelf.resources) && has(oldSelf.resources.storageName))",message="spec.resources.storageName is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.resources) && has(self.resources.claimTemplateName)) == (has(oldSelf.resources) && has(oldSelf.resources.claimTemplateName))",message="spec.resources.claimTemplateName is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.resources) && has(self.resources.statefulSetName)) == (has(oldSelf.resources) && has(oldSelf.resources.statefulSetName))",message="spec.resources.statefulSetName is immutable"
type ModelCacheBindingSpec struct {
	// Identity says which model and sharing domain the cache is for.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.identity is immutable"
	Identity CacheIdentity `json:"identity"`

	// Decision is the storage decision, with its digest.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.decision is immutable"
	Decision CacheDecision `json:"decision"`

	// Source is the git revision of the manifest that made the decision.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.source is immutable"
	Source DecisionSource `json:"source"`

	// Supersedes names the binding whose storage this one took over: its
	// server's decision changed in retainFor alone. Empty when the binding
	// has storage of its own.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.supersedes is immutable"
	// +optional
	Supersedes string `json:"supersedes,omitempty"`

	// Resources are the claims the binding owns.
	// +optional
	Resources CacheResources `json:"resources,omitempty"`
}

// CacheIdentity is what a cache holds and who may share it.
type CacheIdentity struct {
	// Model is the HuggingFace repository id or local path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model"`

	// Revision is the model revision as written in the manifest.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Revision string `json:"revision"`

	// SharingDomain is the namespace (Shared) or namespace/server (PerReplica).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	SharingDomain string `json:"sharingDomain"`

	// Key is the sha256 digest of model, revision and sharing domain.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Key string `json:"key"`
}

// CacheDecision is where and for how long a cache is stored. Digest covers
// the identity and every field here that comes from the manifest; the
// cluster facts Provisioner and StorageClassParametersDigest sit beside it.
type CacheDecision struct {
	// Mode is PerReplica or Shared.
	// +kubebuilder:validation:XValidation:rule="self == 'PerReplica' || self == 'Shared'",message="decision.mode must be PerReplica or Shared: cache.mode None records no binding"
	Mode CacheMode `json:"mode"`

	// StorageClassName is the StorageClass named by the manifest; empty means
	// the cluster default.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`

	// Size is the requested size of each claim.
	Size resource.Quantity `json:"size"`

	// AccessModes of the claims.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=ReadWriteOnce;ReadOnlyMany;ReadWriteMany;ReadWriteOncePod
	// +listType=set
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes"`

	// ReclaimPolicy is what happens to data when no server uses it.
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy"`

	// RetainFor is how long data outlives its last user.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	RetainFor metav1.Duration `json:"retainFor"`

	// Digest is the sha256 digest of the canonical encoding of the identity
	// and the fields above.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest"`

	// Provisioner of the StorageClass at decision time (a cluster fact).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Provisioner string `json:"provisioner,omitempty"`

	// StorageClassParametersDigest is the sha256 digest of the StorageClass
	// parameters at decision time (a cluster fact).
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	StorageClassParametersDigest string `json:"storageClassParametersDigest,omitempty"`

	// ExistingClaim is the user's claim the cache is (spec.cache.existingClaim
	// of the manifest): recorded, in the digest, but not owned. The binding
	// never creates, lists in resources or deletes it; mode is then Shared
	// (every replica mounts it), size 0 (the claim's own) and accessModes
	// ReadOnlyMany (how the servers mount it).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ExistingClaim string `json:"existingClaim,omitempty"`
}

// ReclaimPolicy is what happens to a cache when it is no longer used.
// +kubebuilder:validation:Enum=Retain
type ReclaimPolicy string

// ReclaimPolicyRetain keeps data for retainFor after its last user.
const ReclaimPolicyRetain ReclaimPolicy = "Retain"

// DecisionSource is the git revision of the manifest behind a decision.
//
// +kubebuilder:validation:XValidation:rule="self.method == 'Unknown' || has(self.revision)",message="source.revision is required unless the method is Unknown"
type DecisionSource struct {
	// Method is how the revision was found.
	Method SourceMethod `json:"method"`

	// Revision as the GitOps tool writes it, e.g. main@sha1:<hex>.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Revision string `json:"revision,omitempty"`

	// Commit is the bare commit sha.
	// +kubebuilder:validation:Pattern=`^([a-f0-9]{40}|[a-f0-9]{64})$`
	// +optional
	Commit string `json:"commit,omitempty"`

	// Repository is the URL of the git repository.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Repository string `json:"repository,omitempty"`

	// Path is the path rendered inside the repository.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Path string `json:"path,omitempty"`

	// Chart is the Helm chart when the manifest came from a chart
	// repository rather than git; Repository is then the chart repository
	// and Revision the chart version.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Chart string `json:"chart,omitempty"`

	// Artifact is the digest (sha256:<hex>) of the OCI artifact the GitOps
	// tool applied, when the manifest came from one (a Flux
	// OCIRepository). Repository and Commit then name the git repository
	// and commit the artifact was built from, as its
	// org.opencontainers.image.source and .revision annotations say; both
	// are empty when it does not say.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	Artifact string `json:"artifact,omitempty"`

	// ObjectRef is the Flux Kustomization or Argo CD Application.
	// +optional
	ObjectRef *SourceObjectReference `json:"objectRef,omitempty"`

	// Render holds what rendering the manifest needs that the repository
	// does not: the GitOps object's settings at decision time.
	// +optional
	Render *RenderInputs `json:"render,omitempty"`

	// DecidedAt is when the decision was recorded.
	DecidedAt metav1.Time `json:"decidedAt"`
}

// SourceMethod is how a decision's git revision was found.
// +kubebuilder:validation:Enum=Declared;Flux;ArgoCD;Unknown
type SourceMethod string

const (
	// SourceDeclared comes from the embedops.dev/source-* annotations.
	SourceDeclared SourceMethod = "Declared"
	// SourceFlux comes from the Flux Kustomization that applied the object.
	SourceFlux SourceMethod = "Flux"
	// SourceArgoCD comes from the Argo CD Application that synced the object.
	SourceArgoCD SourceMethod = "ArgoCD"
	// SourceUnknown means no revision could be found.
	SourceUnknown SourceMethod = "Unknown"
)

// RenderInputs are the inputs of a render that are not in git, recorded
// when the decision is made so an audit renders with the same ones. Secret
// values are never recorded, only the Secrets' names and versions.
type RenderInputs struct {
	// Spec is the render-relevant part of the Flux Kustomization's or Argo
	// CD Application's spec at decision time, as JSON: everything but the
	// fields known not to change what is rendered (intervals, health
	// checks, pruning, the source reference).
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Spec string `json:"spec,omitempty"`

	// Revisions are the revisions of every source of a multi-source Argo
	// CD Application, in the order of spec.sources.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Revisions []string `json:"revisions,omitempty"`

	// SubstituteFrom are the ConfigMaps and Secrets of a Flux
	// Kustomization's postBuild.substituteFrom at decision time.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	SubstituteFrom []SubstitutionSource `json:"substituteFrom,omitempty"`

	// Source is, as JSON, what of a Flux GitRepository at decision time
	// adds files to its artifact beyond the commit: spec.include with the
	// revisions status.includedArtifacts says were included, and
	// spec.recurseSubmodules. Empty when the source adds none.
	// +kubebuilder:validation:MaxLength=16384
	// +optional
	Source string `json:"source,omitempty"`
}

// MaxRenderSpecLength is the longest RenderInputs.Spec a binding records.
const MaxRenderSpecLength = 65536

// MaxRenderSourceLength is the longest RenderInputs.Source a binding
// records.
const MaxRenderSourceLength = 16384

// SubstitutionSource is one ConfigMap or Secret a Flux post-build
// substitution read its variables from.
type SubstitutionSource struct {
	// Kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// Name of the object, in the Kustomization's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Optional is set when a missing object is no error.
	// +optional
	Optional bool `json:"optional,omitempty"`
	// ResourceVersion of the object at decision time; empty when it did
	// not exist.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// SourceObjectReference points at a GitOps object.
type SourceObjectReference struct {
	// APIVersion of the object.
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of the object.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// CacheResources are the claims a binding owns and the names its server's
// workload knows them by.
type CacheResources struct {
	// StorageName is the name the workload carries for the storage: the
	// embedops.dev/cache-binding label of the pods and claims, and the
	// Shared claim's name. Empty means the binding's own name; a binding
	// that supersedes another records that one's, so the StatefulSet and
	// its pods do not change.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.resources.storageName is immutable"
	// +optional
	StorageName string `json:"storageName,omitempty"`

	// ClaimTemplateName is the PerReplica volumeClaimTemplates entry that
	// makes the claims. Empty means the one derived from the decision and
	// the binding's name; a binding that supersedes another records that
	// one's.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.resources.claimTemplateName is immutable"
	// +optional
	ClaimTemplateName string `json:"claimTemplateName,omitempty"`

	// StatefulSetName is the PerReplica StatefulSet whose claim templates
	// make the claims: <claimTemplateName>-<statefulSetName>-<ordinal>
	// (kubernetes pkg/controller/statefulset/stateful_set_utils.go,
	// getPersistentVolumeClaimName). Empty means the server's name. A
	// storage change made while that StatefulSet serves gets a StatefulSet
	// of its own, so the new pods start beside the old ones; a binding that
	// supersedes another records that one's.
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.resources.statefulSetName is immutable"
	// +optional
	StatefulSetName string `json:"statefulSetName,omitempty"`

	// PersistentVolumeClaimNames are the cache claims, in the binding's
	// namespace. Names may be added, never removed.
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	PersistentVolumeClaimNames []string `json:"persistentVolumeClaimNames,omitempty"`

	// VolumeSnapshotNames are the VolumeSnapshots the binding took of its
	// claims to seed new replicas (spec.cache.seed), in its namespace,
	// recorded before each is created and deleted when the binding
	// releases its claims. Names may be added, never removed.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	VolumeSnapshotNames []string `json:"volumeSnapshotNames,omitempty"`
}

// ModelCacheBindingStatus is the lifecycle state of a binding.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || has(self.phase)",message="status.phase cannot be removed"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || self.phase == oldSelf.phase || (oldSelf.phase == 'Active' && self.phase == 'Retiring') || (oldSelf.phase == 'Retiring' && self.phase == 'Released') || (oldSelf.phase == 'Active' && self.phase == 'Released' && has(self.supersededBy))",message="status.phase only moves Active -> Retiring -> Released, or Active -> Released when superseded"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.supersededBy) || has(self.supersededBy)",message="status.supersededBy cannot be removed"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || oldSelf.phase == 'Active' || (has(self.supersededBy) == has(oldSelf.supersededBy) && (!has(self.supersededBy) || self.supersededBy == oldSelf.supersededBy))",message="status.supersededBy changes only while the binding is Active"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.realized) || has(self.realized)",message="status.realized cannot be removed"
type ModelCacheBindingStatus struct {
	// ObservedGeneration is the last generation reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is Active, Retiring or Released, in that order only.
	// +optional
	Phase BindingPhase `json:"phase,omitempty"`

	// RequestReferences are the servers using the cache.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=map
	// +listMapKey=uid
	// +optional
	RequestReferences []RequestReference `json:"requestReferences,omitempty"`

	// IdleSince is when the last reference was removed.
	// +optional
	IdleSince *metav1.Time `json:"idleSince,omitempty"`

	// RetireAfter is when an idle binding becomes Retiring.
	// +optional
	RetireAfter *metav1.Time `json:"retireAfter,omitempty"`

	// ReleasedAt is when the claims were gone and the binding Released.
	// +optional
	ReleasedAt *metav1.Time `json:"releasedAt,omitempty"`

	// SupersededBy names the binding that takes over this one's storage.
	// It is set while the binding is Active and referenced by one server
	// alone, before that binding is created; from then on the binding
	// gains no reference and deletes no claim while its successor exists:
	// it is Released as Superseded instead.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SupersededBy string `json:"supersededBy,omitempty"`

	// Realized is what was actually downloaded and bound.
	// +optional
	Realized *RealizedCache `json:"realized,omitempty"`

	// ClaimFills say how each claim embedops made from another was
	// filled: a clone of which claim, at which commit, and when a copy
	// was abandoned, why its replica downloads instead. A claim not
	// listed was filled by its populator from the hub.
	// +kubebuilder:validation:MaxItems=512
	// +listType=map
	// +listMapKey=name
	// +optional
	ClaimFills []ClaimFill `json:"claimFills,omitempty"`

	// Conditions of the binding.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClaimFill is how one claim of a binding was filled.
type ClaimFill struct {
	// Name of the claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Method is Clone or Snapshot, or Download once a copy was abandoned.
	Method ClaimFillMethod `json:"method"`
	// Source is the claim it was cloned from, or the VolumeSnapshot it
	// was restored from.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Source string `json:"source,omitempty"`
	// Commit is the model commit the source held, the binding's.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{40}$`
	// +optional
	Commit string `json:"commit,omitempty"`
	// Fallback says why a copy was abandoned for a download.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Fallback string `json:"fallback,omitempty"`
}

// ClaimFillMethod is how a claim was filled.
// +kubebuilder:validation:Enum=Clone;Snapshot;Download
type ClaimFillMethod string

const (
	// ClaimFilledByClone is a CSI volume clone of another claim.
	ClaimFilledByClone ClaimFillMethod = "Clone"
	// ClaimFilledBySnapshot is a restore of the binding's VolumeSnapshot.
	ClaimFilledBySnapshot ClaimFillMethod = "Snapshot"
	// ClaimFilledByDownload was filled from the hub by its populator.
	ClaimFilledByDownload ClaimFillMethod = "Download"
)

// BindingPhase is the lifecycle phase of a binding.
// +kubebuilder:validation:Enum=Active;Retiring;Released
type BindingPhase string

const (
	// BindingActive may gain and lose references.
	BindingActive BindingPhase = "Active"
	// BindingRetiring is releasing its claims; it never gains references.
	BindingRetiring BindingPhase = "Retiring"
	// BindingReleased holds no data and stays as an audit record.
	BindingReleased BindingPhase = "Released"
)

// RequestReference is a server that uses a cache.
type RequestReference struct {
	// Kind of the user, EmbeddingServer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace of the user.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the user.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the user.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	UID types.UID `json:"uid"`
}

// RealizedCache is what a cache holds. Each field is immutable once set,
// except the room (freeBytes and reclaimableBytes): it follows the
// replicas' latest results and is never removed.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.resolvedCommit) || (has(self.resolvedCommit) && self.resolvedCommit == oldSelf.resolvedCommit)",message="status.realized.resolvedCommit is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.contentDigest) || (has(self.contentDigest) && self.contentDigest == oldSelf.contentDigest)",message="status.realized.contentDigest is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.persistentVolumeNames) || (has(self.persistentVolumeNames) && self.persistentVolumeNames == oldSelf.persistentVolumeNames)",message="status.realized.persistentVolumeNames is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.files) || (has(self.files) && self.files == oldSelf.files)",message="status.realized.files is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.bytes) || (has(self.bytes) && self.bytes == oldSelf.bytes)",message="status.realized.bytes is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.freeBytes) || has(self.freeBytes)",message="status.realized.freeBytes cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.reclaimableBytes) || has(self.reclaimableBytes)",message="status.realized.reclaimableBytes cannot be removed once set"
type RealizedCache struct {
	// ResolvedCommit is the model commit the revision resolved to.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{40}$`
	// +optional
	ResolvedCommit string `json:"resolvedCommit,omitempty"`

	// ContentDigest is the sha256 digest of the downloaded files' manifest.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	ContentDigest string `json:"contentDigest,omitempty"`

	// PersistentVolumeNames are the volumes bound to the claims.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	PersistentVolumeNames []string `json:"persistentVolumeNames,omitempty"`

	// Files are the cached files of the model, by their path in the
	// repository: those TEI reads with the server's image. Omitted when
	// they are too many to record; Bytes still counts them.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	Files []string `json:"files,omitempty"`

	// Bytes is the total size of the cached files.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Bytes *int64 `json:"bytes,omitempty"`

	// FreeBytes is the space the claims had available (statfs f_bavail)
	// after their populators' latest run of this revision: that of the
	// claim with the least room (FreeBytes plus ReclaimableBytes) over
	// every replica's latest result, lowered as each reports and raised
	// once all have. Omitted when no populator reported it; an in-place
	// revision change then checks both revisions, with their headroom,
	// against the claims' usable size instead.
	// +kubebuilder:validation:Minimum=0
	// +optional
	FreeBytes *int64 `json:"freeBytes,omitempty"`

	// ReclaimableBytes is what the same claim's populator frees before it
	// fetches the next revision: the blobs only older revisions name.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReclaimableBytes *int64 `json:"reclaimableBytes,omitempty"`
}

// MaxRealizedFiles and MaxRealizedFileNameLength bound status.realized.files.
const (
	MaxRealizedFiles          = 1000
	MaxRealizedFileNameLength = 253
)

// ModelCacheBinding records one cache storage decision and its lifetime.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="embedops.dev/schema-version=6"
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcb,categories=embedops
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.decision.mode`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.decision.storageClassName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="References",type=string,JSONPath=`.status.requestReferences[*].name`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.spec.source.commit`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ModelCacheBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the recorded decision.
	Spec ModelCacheBindingSpec `json:"spec"`
	// Status is the lifecycle state.
	// +optional
	Status ModelCacheBindingStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (in *ModelCacheBinding) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces the status conditions.
func (in *ModelCacheBinding) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// ModelCacheBindingList is a list of ModelCacheBindings.
//
// +kubebuilder:object:root=true
type ModelCacheBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelCacheBinding `json:"items"`
}

// GitSourceInputs is the JSON recorded in RenderInputs.Source.
type GitSourceInputs struct {
	// Include are the GitRepository's spec.include entries, in order.
	// +optional
	Include []GitInclude `json:"include,omitempty"`
	// RecurseSubmodules is the GitRepository's spec.recurseSubmodules.
	// +optional
	RecurseSubmodules bool `json:"recurseSubmodules,omitempty"`
}

// GitInclude is one entry of a GitRepository's spec.include, with what
// source-controller copied for it.
type GitInclude struct {
	// Name is the included GitRepository, in the including one's namespace.
	Name string `json:"name"`
	// Repository is the included GitRepository's spec.url.
	// +optional
	Repository string `json:"repository,omitempty"`
	// Revision is the included artifact's revision, from the including
	// GitRepository's status.includedArtifacts at the same index.
	// +optional
	Revision string `json:"revision,omitempty"`
	// FromPath is the directory of the included artifact that is copied;
	// empty means its root.
	// +optional
	FromPath string `json:"fromPath,omitempty"`
	// ToPath is where it is copied to in the including artifact; the
	// included GitRepository's name when spec.include leaves it empty.
	ToPath string `json:"toPath"`
}
