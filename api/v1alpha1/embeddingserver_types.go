package v1alpha1

import (
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EmbeddingServerKind is the kind of EmbeddingServer objects.
const EmbeddingServerKind = "EmbeddingServer"

// DefaultImage is the TEI image a server runs when spec.image is empty. It is
// kept equal to the schema default below.
const DefaultImage = "ghcr.io/huggingface/text-embeddings-inference:cpu-1.9"

// EmbeddingServerSpec is the desired state of a TEI server.
//
// +kubebuilder:validation:XValidation:rule="!has(self.model.tokenSecretRef) || !has(self.env) || !self.env.exists(e, e.name == 'HF_TOKEN' || e.name == 'HF_API_TOKEN')",message="env must not set HF_TOKEN or HF_API_TOKEN when model.tokenSecretRef is set: the token comes from the Secret"
// +kubebuilder:validation:XValidation:rule="!has(self.model.tokenSecretRef) || !has(self.args) || !self.args.exists(a, a.startsWith('--hf-token') || a.startsWith('--hf-api-token'))",message="args must not set --hf-token or --hf-api-token when model.tokenSecretRef is set: TEI refuses a second token (router/src/main.rs, conflicts_with)"
// +kubebuilder:validation:XValidation:rule="!has(self.model.caBundleRef) || !has(self.env) || !self.env.exists(e, e.name == 'SSL_CERT_FILE')",message="env must not set SSL_CERT_FILE when model.caBundleRef is set: it names the mounted bundle"
type EmbeddingServerSpec struct {
	// Model is the HuggingFace model the server loads.
	Model ModelSpec `json:"model"`

	// Image is the TEI container image.
	// +kubebuilder:default="ghcr.io/huggingface/text-embeddings-inference:cpu-1.9"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy is the pull policy of the TEI container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets are the Secrets used to pull the image: at most 16,
	// each name at most 253 characters.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(s, !has(s.name) || s.name.size() <= 253)",message="imagePullSecrets names must be at most 253 characters"
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Port is the HTTP port TEI listens on.
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Args are extra TEI arguments, at most 64 of at most 1024 characters
	// each. The model, revision and port are set from their own fields and
	// must not be repeated here.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.startsWith('--model-id') && !a.startsWith('--revision') && !a.startsWith('--port') && !a.startsWith('--hostname') && !a.startsWith('-p'))",message="args must not set --model-id, --revision, --port (-p) or --hostname: use spec.model and spec.port"
	// +optional
	Args []string `json:"args,omitempty"`

	// Env are extra environment variables of the TEI container;
	// valueFrom.secretKeyRef works. HF_ENDPOINT, HF_HUB_* and the proxy
	// variables reach the downloader too. A proxy variable that is not a URL
	// (or host:port) stalls the server as ConfigurationInvalid: a CEL check
	// of every value would exceed the API server's cost budget. At most 128 variables, names of at most
	// 256 characters and values of at most 32768 (larger data belongs in a
	// ConfigMap or Secret).
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name.size() <= 256)",message="env names must be at most 256 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.value) || e.value.size() <= 32768)",message="env values must be at most 32768 characters: put larger data in a ConfigMap or Secret"
	// +kubebuilder:validation:XValidation:rule="!self.exists(e, e.name == 'HUGGINGFACE_HUB_CACHE' || e.name == 'HF_HUB_CACHE' || e.name == 'HF_HOME')",message="env must not set HUGGINGFACE_HUB_CACHE, HF_HUB_CACHE or HF_HOME: the cache location is managed by spec.cache"
	// +kubebuilder:validation:XValidation:rule="!(self.exists(e, e.name == 'HF_TOKEN') && self.exists(e, e.name == 'HF_API_TOKEN'))",message="env must not set both HF_TOKEN and HF_API_TOKEN: TEI refuses the pair and exits (router/src/main.rs, conflicts_with); set HF_TOKEN, or better spec.model.tokenSecretRef"
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources are the TEI container's requests and limits, GPUs included:
	// at most 32 requests, 32 limits and 16 claims.
	// +kubebuilder:validation:XValidation:rule="(!has(self.requests) || self.requests.size() <= 32) && (!has(self.limits) || self.limits.size() <= 32) && (!has(self.claims) || self.claims.size() <= 16)",message="resources may have at most 32 requests, 32 limits and 16 claims"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Replicas is the number of TEI pods; 0 scales the server to zero. It is
	// the scale subresource's spec.replicas, so kubectl scale and a
	// HorizontalPodAutoscaler change it. A manifest that leaves it out lets
	// them do so without a GitOps tool setting it back on its next apply.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Cache says where the model weights are cached.
	// +kubebuilder:default={}
	// +optional
	Cache CacheSpec `json:"cache,omitempty"`

	// PodTemplate is a strategic-merge patch over the generated pod template.
	// The TEI container is named "embedding".
	//
	// A patch that reaches the host (hostNetwork, hostPID, hostIPC, hostPath
	// volumes, hostPort, hostProcess) or raises privileges (privileged,
	// allowPrivilegeEscalation, capabilities other than NET_BIND_SERVICE,
	// running as root, Unconfined seccomp or AppArmor, an Unmasked /proc, or
	// loosening the generated pod's restricted security context) is
	// refused, never stripped: the server stalls as ConfigurationInvalid
	// with a Warning event and its running pods are left as they are. The
	// check is made when the controller builds the pod, not at admission:
	// CEL cannot read the fields of this schemaless object.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	PodTemplate *apiextensionsv1.JSON `json:"podTemplate,omitempty"`

	// DisruptionBudget overrides the PodDisruptionBudget "<name>" that
	// limits voluntary disruptions (a node drain) while the server runs two
	// replicas or more; without it the budget is maxUnavailable: 1. Below two
	// replicas no budget exists, so a drain is never blocked.
	// +optional
	DisruptionBudget *DisruptionBudgetSpec `json:"disruptionBudget,omitempty"`

	// Rollout shapes how the pods move to new cache storage (a new storage
	// class, a size the claims cannot grow to, a cache mode), which gives
	// them a StatefulSet of their own beside the serving one.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// NetworkPolicy, when present, adds a NetworkPolicy "<name>" that admits
	// ingress to the server's pods on the HTTP port and TEI's metrics port
	// from the listed peers only. Egress is not restricted, so the pods can
	// still download models. It takes effect only where the cluster's
	// network plugin enforces NetworkPolicies.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// ServiceAccountName is the ServiceAccount the pods run as.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// ProgressDeadline is how long the server's pods may wait in a state the
	// status diagnoses (Unschedulable while a node is added, ErrImagePull or
	// ImagePullBackOff, CrashLoopBackOff, OOMKilled,
	// CreateContainerConfigError, EndpointUnavailable) before the server is
	// Stalled, as a Deployment's progressDeadlineSeconds: the Deployment
	// controller times a rollout out when its last progress is older than
	// the deadline (kubernetes pkg/controller/deployment/progress.go
	// syncRolloutStatus, util/deployment_util.go DeploymentProgressing and
	// DeploymentTimedOut), and kstatus reads a Deployment as Failed only
	// then (pkg/kstatus/status/core.go, deploymentConditions). Until the
	// deadline the server is Reconciling=True with the pods' reason on
	// Ready=False, which Flux and Argo CD read as in progress; after it,
	// Stalled=True with that reason and a Warning event, until the server
	// progresses again. The deadline runs from the last progress: a new
	// generation, more ready or updated replicas, or the server leaving
	// Ready. Unlike a Deployment, which stops timing once a rollout
	// completed, a server that loses a pod later starts a new wait. At most
	// 8760h (365 days).
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('8760h')",message="progressDeadline must be a duration greater than zero and at most 8760h, such as 10m or 1h30m"
	// +optional
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// Suspend stops reconciliation; running children are left as they are.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// DisruptionBudgetSpec sets one of the PodDisruptionBudget's limits. Each is
// a non-negative number of pods or a percentage from 0% to 100%, as the API
// server requires of a PodDisruptionBudget (kubernetes
// pkg/apis/policy/validation/validation.go, ValidatePodDisruptionBudgetSpec).
//
// +kubebuilder:validation:XValidation:rule="has(self.maxUnavailable) != has(self.minAvailable)",message="disruptionBudget must set exactly one of maxUnavailable and minAvailable"
type DisruptionBudgetSpec struct {
	// MaxUnavailable is how many pods a disruption may take down at once.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="maxUnavailable must be a non-negative integer or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MinAvailable is how many pods must stay available during a
	// disruption.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="minAvailable must be a non-negative integer or a percentage from 0% to 100%"
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// RolloutSpec shapes a move to new cache storage.
type RolloutSpec struct {
	// MaxSurge is how many pods of the new storage may run beyond the
	// server's replicas while it moves, a number or a percentage of the
	// replicas (rounded up), as a Deployment's maxSurge. Unset, it is the
	// disruption budget's maxUnavailable, at least 1 (1 with the default
	// budget): a new pod starts, and an old one goes once it is ready, so
	// every replica serves throughout, but a cluster with no room for the
	// extra pod (a full GPU pool) never finishes the move. 0 replaces the
	// pods in place within the disruption budget (at least one at a time):
	// an old pod goes before its successor starts. For one replica that is
	// an outage until the new pod is ready, which the Ready condition and
	// an event say.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="maxSurge must be a non-negative integer or a percentage from 0% to 100%"
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// NetworkPolicySpec lists who may reach a server's pods.
type NetworkPolicySpec struct {
	// From are the peers admitted, at most 16, each as in a NetworkPolicy
	// ingress rule: a podSelector and/or a namespaceSelector, or an ipBlock
	// alone. An empty list admits the pods of the server's namespace only.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	From []NetworkPolicyPeer `json:"from,omitempty"`
}

// NetworkPolicyPeer is a networking.k8s.io/v1 NetworkPolicyPeer, field for
// field and in the same YAML, with the API server's checks as schema and CEL
// rules (kubernetes pkg/apis/networking/validation/validation.go:
// ValidateNetworkPolicyPeer, ValidateIPBlock; label selectors as
// apimachinery's ValidateLabelSelector), so a peer the NetworkPolicy API
// would refuse is refused at admission. It is a type of its own, not
// networkingv1.NetworkPolicyPeer, because CEL rules over that type's
// unbounded lists, maps and strings exceed the CRD's rule cost budget.
//
// +kubebuilder:validation:XValidation:rule="has(self.podSelector) || has(self.namespaceSelector) || has(self.ipBlock)",message="networkPolicy.from: each peer must set podSelector, namespaceSelector or ipBlock"
// +kubebuilder:validation:XValidation:rule="!has(self.ipBlock) || (!has(self.podSelector) && !has(self.namespaceSelector))",message="networkPolicy.from: a peer may not set ipBlock together with podSelector or namespaceSelector"
type NetworkPolicyPeer struct {
	// PodSelector selects pods, in the server's namespace or in the
	// namespaces namespaceSelector selects; {} selects all.
	// +optional
	PodSelector *PeerSelector `json:"podSelector,omitempty"`
	// NamespaceSelector selects namespaces; {} selects all.
	// +optional
	NamespaceSelector *PeerSelector `json:"namespaceSelector,omitempty"`
	// IPBlock admits a range of addresses.
	// +optional
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
}

// PeerSelector is a metav1.LabelSelector with at most 16 labels and 16
// expressions.
type PeerSelector struct {
	// MatchLabels are label keys and values that must all match.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="networkPolicy.from: matchLabels keys must be valid label keys"
	// +optional
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions are label requirements that must all match.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	MatchExpressions []PeerSelectorRequirement `json:"matchExpressions,omitempty"`
}

// PeerSelectorRequirement is a metav1.LabelSelectorRequirement.
//
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && self.values.size() > 0) : (!has(self.values) || self.values.size() == 0)",message="networkPolicy.from: matchExpressions with In or NotIn need values, with Exists or DoesNotExist none"
type PeerSelectorRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values are the label values In and NotIn compare with.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Values []LabelValue `json:"values,omitempty"`
}

// LabelValue is a label value: empty, or at most 63 alphanumerics, '-', '_'
// and '.', starting and ending with an alphanumeric.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// IPBlock is a networking.k8s.io/v1 IPBlock: a CIDR and exceptions
// strictly inside it.
//
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.cidr) || !has(self.except) || self.except.all(e, isCIDR(e) && cidr(self.cidr).containsCIDR(e) && cidr(e).prefixLength() > cidr(self.cidr).prefixLength())",message="networkPolicy.from: each ipBlock.except must be a CIDR strictly inside ipBlock.cidr"
type IPBlock struct {
	// CIDR is the admitted range, e.g. 10.0.0.0/16 or 2001:db8::/64.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="networkPolicy.from: ipBlock.cidr must be a CIDR such as 10.0.0.0/16 or 2001:db8::/64"
	CIDR string `json:"cidr"`
	// Except are ranges inside CIDR that are not admitted.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	Except []string `json:"except,omitempty"`
}

// ModelSpec names a HuggingFace model.
type ModelSpec struct {
	// Name is a HuggingFace repository id (org/name) or an absolute local path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^(/\S*|[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?)$`
	Name string `json:"name"`

	// Revision is the branch, tag or commit of the model repository.
	// +kubebuilder:default=main
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Revision string `json:"revision,omitempty"`

	// TokenSecretRef selects the key of a Secret holding a HuggingFace token.
	// TEI gets it as HF_TOKEN only (router/src/main.rs refuses HF_TOKEN
	// together with the deprecated HF_API_TOKEN), and so does the downloader.
	// +optional
	TokenSecretRef *SecretKeyRef `json:"tokenSecretRef,omitempty"`

	// CABundleRef selects a PEM bundle of certificate authorities, for a hub
	// mirror or an HTTPS proxy signed by a private CA. It is mounted read-only
	// into TEI and the downloader, and SSL_CERT_FILE names it: OpenSSL,
	// which TEI's HTTP client uses on Linux, and Go read that variable. The
	// bundle replaces the image's default CA file, so it must hold every CA
	// the downloads need. A bundle that does not exist stalls the server.
	// +optional
	CABundleRef *CABundleRef `json:"caBundleRef,omitempty"`
}

// CABundleRef selects one key of a ConfigMap or Secret in the object's
// namespace.
type CABundleRef struct {
	// Kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	// +kubebuilder:default=ConfigMap
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name of the ConfigMap or Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key holding the PEM bundle.
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretKeyRef selects one key of a Secret in the object's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key in the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// CacheSpec says where and for how long model weights are cached.
//
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'None' || !has(self.storageClassName)",message="cache.mode None keeps no cache: remove storageClassName"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'None' || !has(self.size) || quantity(string(self.size)).compareTo(quantity('10Gi')) == 0",message="cache.mode None keeps no cache: remove size"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'None' || !has(self.retainFor) || duration(self.retainFor) == duration('24h')",message="cache.mode None keeps no cache: remove retainFor"
// +kubebuilder:validation:XValidation:rule="!has(self.existingClaim) || !has(self.mode) || self.mode != 'None'",message="cache.existingClaim mounts a claim, cache.mode None keeps no cache: remove one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.existingClaim) || !has(self.mode) || self.mode != 'Shared'",message="cache.existingClaim is mounted by every replica as it is: remove cache.mode Shared, which makes a new claim"
// +kubebuilder:validation:XValidation:rule="!has(self.existingClaim) || !has(self.storageClassName)",message="cache.existingClaim uses the claim as it is: remove cache.storageClassName"
// +kubebuilder:validation:XValidation:rule="!has(self.existingClaim) || !has(self.size) || quantity(string(self.size)).compareTo(quantity('10Gi')) == 0",message="cache.existingClaim uses the claim as it is: remove cache.size"
type CacheSpec struct {
	// Mode is PerReplica (a claim per pod), Shared (one ReadWriteMany claim
	// per namespace and model) or None (an emptyDir; nothing is recorded).
	// +kubebuilder:default=PerReplica
	// +optional
	Mode CacheMode `json:"mode,omitempty"`

	// StorageClassName is the StorageClass of the cache claims; empty means
	// the cluster default.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`

	// Size is the requested size of each cache claim: more than zero and
	// less than 8Ei, written in at most 32 characters with an exponent of at
	// most two digits. The rules that compare it run only on a size so
	// written, so a huge exponent is never expanded at admission.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="string(self).size() <= 32 && !string(self).matches('[eE][-+]?[0-9]{3}')",message="cache.size must be at most 32 characters with an exponent of at most two digits, e.g. 40Gi or 50e9"
	// +kubebuilder:validation:XValidation:rule="string(self).size() > 32 || string(self).matches('[eE][-+]?[0-9]{3}') || quantity(string(self)).isGreaterThan(quantity('0'))",message="cache.size must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="string(self).size() > 32 || string(self).matches('[eE][-+]?[0-9]{3}') || !quantity(string(self)).isGreaterThan(quantity('9223372036854775807'))",message="cache.size must be less than 8Ei"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// RetainFor is how long cached data outlives its last user, at most
	// 8760h (365 days); 0s releases it as soon as no server uses it.
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('8760h')",message="cache.retainFor must be at most 8760h (365 days)"
	// +optional
	RetainFor *metav1.Duration `json:"retainFor,omitempty"`

	// ExistingClaim names a PersistentVolumeClaim in the server's namespace
	// that already holds the model in the hub cache layout
	// (models--ORG--NAME/refs/<revision> holding a commit,
	// snapshots/<commit>/...), filled by the user. Every replica mounts it
	// read-only; the server needs no token and no hub. Before the server
	// starts, the claim must exist and be Bound, and a verify Job checks
	// that it holds the model at the revision: otherwise the server stalls
	// with the reason ClaimNotFound, ClaimNotBound or ModelNotInClaim. The
	// binding records the claim as one it does not own: it is never
	// deleted. It excludes mode None and Shared, storageClassName and size
	// (mode is otherwise ignored: the schema defaults it).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ExistingClaim string `json:"existingClaim,omitempty"`

	// Seed is how a PerReplica server fills the claim of a replica that
	// has none yet (a scale-up, or replicas 2..n of a new server) once
	// another replica's claim of the same binding holds the model at the
	// binding's commit. Clone makes the new claim a CSI volume clone of
	// that claim (its dataSourceRef names it; the StorageClass's driver
	// must support cloning). Snapshot takes one VolumeSnapshot of that
	// claim per binding and commit, owned and deleted with the binding,
	// and restores each new claim from it (the cluster needs a
	// VolumeSnapshotClass of the StorageClass's driver). Both hold
	// replicas 2..n of a new server until the first is populated.
	// Download leaves the claim empty for the replica's populator to fill
	// from the hub. Auto, the default, snapshots when a
	// VolumeSnapshotClass names the StorageClass's driver, else clones,
	// and never holds a replica back. A copy not bound within two minutes
	// of being handed to its provisioner is deleted (it holds nothing)
	// and its replica downloads; Auto then downloads for the binding's
	// later replicas. A copy is verified file by file before TEI starts.
	// It does not change the storage decision, and is ignored for Shared,
	// None and an existing claim.
	// +kubebuilder:validation:Enum=Auto;Clone;Snapshot;Download
	// +optional
	Seed CacheSeed `json:"seed,omitempty"`

	// VolumeSnapshotClassName is the VolumeSnapshotClass of the binding's
	// snapshots (seed Auto or Snapshot). Empty means the class of the
	// StorageClass's driver annotated
	// snapshot.storage.kubernetes.io/is-default-class, else the only one
	// of that driver. A class of another driver is refused with a
	// condition and an event, and replicas download.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	VolumeSnapshotClassName string `json:"volumeSnapshotClassName,omitempty"`
}

// CacheSeed is how a PerReplica server fills a new replica's claim.
type CacheSeed string

const (
	// CacheSeedAuto snapshots where a VolumeSnapshotClass names the
	// class's driver, else clones; a copy that fails downloads.
	CacheSeedAuto CacheSeed = "Auto"
	// CacheSeedClone copies a populated claim by CSI volume cloning.
	CacheSeedClone CacheSeed = "Clone"
	// CacheSeedSnapshot restores a VolumeSnapshot of a populated claim.
	CacheSeedSnapshot CacheSeed = "Snapshot"
	// CacheSeedDownload fills every claim from the hub.
	CacheSeedDownload CacheSeed = "Download"
)

// CacheMode is how a server's model cache is stored.
// +kubebuilder:validation:Enum=PerReplica;Shared;None
type CacheMode string

const (
	// CacheModePerReplica gives every replica its own claim.
	CacheModePerReplica CacheMode = "PerReplica"
	// CacheModeShared mounts one ReadWriteMany claim in every replica.
	CacheModeShared CacheMode = "Shared"
	// CacheModeNone caches nothing beyond the pod's lifetime.
	CacheModeNone CacheMode = "None"
)

// EmbeddingServerStatus is the observed state of a TEI server.
type EmbeddingServerStatus struct {
	meta.ReconcileRequestStatus `json:",inline"`

	// ObservedGeneration is the last generation reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are the kstatus conditions of the server.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase is a one-word summary derived from the conditions.
	// +optional
	Phase ServerPhase `json:"phase,omitempty"`

	// URL is the in-cluster address of the server's Service.
	// +optional
	URL string `json:"url,omitempty"`

	// Replicas is the number of pods the StatefulSet runs.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of ready pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// CacheBinding is the name of the ModelCacheBinding in use.
	// +optional
	CacheBinding string `json:"cacheBinding,omitempty"`

	// EndpointCheck says whether ready pods are asked for TEI's /info.
	// +optional
	EndpointCheck EndpointCheckState `json:"endpointCheck,omitempty"`

	// Served is what TEI reported on /info.
	// +optional
	Served *ServedModel `json:"served,omitempty"`

	// Selector is the label selector of the server's pods, the scale
	// subresource's labelSelectorPath, which a HorizontalPodAutoscaler reads.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Inventory lists the children applied for this server.
	// +optional
	Inventory *ResourceInventory `json:"inventory,omitempty"`

	// Progress is the last progress of a server that is not Ready, the
	// start of spec.progressDeadline; it is removed once the server is
	// Ready. A Deployment keeps this moment in its Progressing condition's
	// lastUpdateTime, which metav1.Condition lacks; no condition's
	// lastTransitionTime can stand in for it, since progress (one more
	// ready replica) changes no condition's status. Kept in the status, so
	// a restarted controller measures from the same moment.
	// +optional
	Progress *ServerProgress `json:"progress,omitempty"`
}

// ServerProgress is when a server last progressed, and the counts it
// progressed to, so that growth can be told.
type ServerProgress struct {
	// LastProgressTime is when the server last progressed: it left Ready,
	// a new generation was seen, or its StatefulSet had more ready or
	// updated replicas than last seen.
	LastProgressTime metav1.Time `json:"lastProgressTime"`

	// Generation is the server generation last seen.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// ReadyReplicas is the StatefulSet's ready replicas last seen.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// UpdatedReplicas is the StatefulSet's replicas at its update revision
	// last seen.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
}

// ServerPhase is a one-word summary of a server's state.
// +kubebuilder:validation:Enum=Pending;Downloading;Ready;Degraded;Failed;ScaledToZero;Terminating
type ServerPhase string

const (
	// PhasePending means children are being created or pods scheduled.
	PhasePending ServerPhase = "Pending"
	// PhaseDownloading means model weights are being downloaded.
	PhaseDownloading ServerPhase = "Downloading"
	// PhaseReady means all desired replicas are ready.
	PhaseReady ServerPhase = "Ready"
	// PhaseDegraded means pods fail in a way that may recover.
	PhaseDegraded ServerPhase = "Degraded"
	// PhaseFailed means the server needs a human.
	PhaseFailed ServerPhase = "Failed"
	// PhaseScaledToZero means the server runs no replicas by request.
	PhaseScaledToZero ServerPhase = "ScaledToZero"
	// PhaseTerminating means the server is being deleted.
	PhaseTerminating ServerPhase = "Terminating"
)

// EndpointCheckState says whether the controller asks TEI's /info.
// +kubebuilder:validation:Enum=Enabled;Disabled
type EndpointCheckState string

const (
	// EndpointCheckEnabled means ready pods must answer /info.
	EndpointCheckEnabled EndpointCheckState = "Enabled"
	// EndpointCheckDisabled means pod addresses are not reachable from the
	// controller, so /info is not asked.
	EndpointCheckDisabled EndpointCheckState = "Disabled"
)

// ServedModel is what a TEI server reported on /info.
type ServedModel struct {
	// ModelID is the model TEI loaded.
	// +optional
	ModelID string `json:"modelID,omitempty"`
	// ModelSHA is the commit of the loaded model.
	// +optional
	ModelSHA string `json:"modelSHA,omitempty"`
	// DType is the numeric type of the weights.
	// +optional
	DType string `json:"dtype,omitempty"`
	// MaxInputLength is the longest input in tokens.
	// +optional
	MaxInputLength int64 `json:"maxInputLength,omitempty"`
	// ExpectedModelSHA is what ModelSHA is compared with: the --revision TEI
	// was started with, which TEI reports as model_sha as given, not
	// resolved.
	// +optional
	ExpectedModelSHA string `json:"expectedModelSHA,omitempty"`
	// ComparedWith says what ExpectedModelSHA is: the binding's resolved
	// commit, which TEI runs once a populator recorded it, or the spec's
	// revision, which TEI runs otherwise.
	// +optional
	ComparedWith ServedComparison `json:"comparedWith,omitempty"`
}

// ServedComparison says what /info's model_sha is compared with.
// +kubebuilder:validation:Enum=ResolvedCommit;SpecRevision
type ServedComparison string

const (
	// ComparedWithResolvedCommit says TEI runs --revision=<the binding's
	// resolved commit>.
	ComparedWithResolvedCommit ServedComparison = "ResolvedCommit"
	// ComparedWithSpecRevision says TEI runs
	// --revision=<spec.model.revision>, a branch, tag or commit as written.
	ComparedWithSpecRevision ServedComparison = "SpecRevision"
)

// ResourceInventory lists applied objects, in Flux's inventory shape.
type ResourceInventory struct {
	// Entries are the applied objects.
	Entries []ResourceRef `json:"entries"`
}

// ResourceRef identifies one applied object.
type ResourceRef struct {
	// ID is "<namespace>_<name>_<group>_<kind>".
	ID string `json:"id"`
	// Version is the object's API version.
	Version string `json:"v"`
}

// EmbeddingServer runs a HuggingFace Text Embeddings Inference server.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="embedops.dev/schema-version=6"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=es,categories=embedops
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model.name`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Binding",type=string,JSONPath=`.status.cacheBinding`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 52 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label of at most 52 characters: it names a StatefulSet and its Services"
type EmbeddingServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec EmbeddingServerSpec `json:"spec"`
	// Kstatus (cli-utils pkg/kstatus/status, checkGeneration) reads a
	// server without status as Current and one whose observedGeneration is
	// not its generation as InProgress; Flux's own kinds default it to -1
	// for that (source-controller api/v1 GitRepository), and so does this.

	// Status is the observed state; observedGeneration is -1 until the
	// controller first writes it.
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status EmbeddingServerStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (in *EmbeddingServer) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces the status conditions.
func (in *EmbeddingServer) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// StatusWritten reports whether the controller ever wrote the status: a
// condition or an observed generation (unwritten, it reads the CRD's
// default observedGeneration -1).
func (in *EmbeddingServer) StatusWritten() bool {
	return len(in.Status.Conditions) > 0 || in.Status.ObservedGeneration > 0
}

// GetReplicas returns the desired replicas, 1 when unset.
func (in *EmbeddingServer) GetReplicas() int32 {
	if in.Spec.Replicas == nil {
		return 1
	}
	return *in.Spec.Replicas
}

// DefaultProgressDeadline is spec.progressDeadline's default, a
// Deployment's progressDeadlineSeconds default (600).
const DefaultProgressDeadline = 10 * time.Minute

// GetProgressDeadline returns spec.progressDeadline, DefaultProgressDeadline
// when unset.
func (in *EmbeddingServer) GetProgressDeadline() time.Duration {
	if in.Spec.ProgressDeadline == nil {
		return DefaultProgressDeadline
	}
	return in.Spec.ProgressDeadline.Duration
}

// EmbeddingServerList is a list of EmbeddingServers.
//
// +kubebuilder:object:root=true
type EmbeddingServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EmbeddingServer `json:"items"`
}
