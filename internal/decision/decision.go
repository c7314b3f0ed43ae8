package decision

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Defaults of the CRD schema, applied when a manifest leaves a field out.
const (
	// DefaultRevision is the model revision when spec.model.revision is empty.
	DefaultRevision = "main"
	// DefaultMode is the cache mode when spec.cache.mode is empty.
	DefaultMode = embedopsv1.CacheModePerReplica
	// DefaultSize is the claim size when spec.cache.size is absent.
	DefaultSize = "10Gi"
	// DefaultRetainFor is how long data outlives its last user when
	// spec.cache.retainFor is absent.
	DefaultRetainFor = 24 * time.Hour
)

// ErrInvalidSpec is wrapped by every error about a spec that cannot be decided
// or recorded: the manifest (or the binding) must be fixed, retrying is useless.
var ErrInvalidSpec = errors.New("invalid cache spec")

// Decision is the identity and storage decision a binding records.
type Decision struct {
	// Identity is what the cache holds and who may share it.
	Identity embedopsv1.CacheIdentity
	// Decision is where and for how long the cache is stored, with its digest.
	Decision embedopsv1.CacheDecision
}

// For returns the cache decision of a server, or nil when spec.cache.mode is
// None. Schema defaults are applied first, so the server may come from the
// API server or straight from a manifest in git. Errors wrap ErrInvalidSpec.
func For(server *embedopsv1.EmbeddingServer) (*Decision, error) {
	if server == nil {
		return nil, fmt.Errorf("%w: no server", ErrInvalidSpec)
	}
	mode, err := cacheMode(server.Spec.Cache.Mode)
	if err != nil || mode == embedopsv1.CacheModeNone {
		return nil, err
	}
	if server.Spec.Cache.ExistingClaim != "" {
		return existingClaimDecision(server)
	}
	identity, err := identityFor(server, mode)
	if err != nil {
		return nil, err
	}
	size, err := cacheSize(server.Spec.Cache.Size)
	if err != nil {
		return nil, err
	}
	retainFor, err := retention(server.Spec.Cache.RetainFor)
	if err != nil {
		return nil, err
	}
	decision := embedopsv1.CacheDecision{
		Mode:             mode,
		StorageClassName: server.Spec.Cache.StorageClassName,
		Size:             size,
		AccessModes:      accessModes(mode),
		ReclaimPolicy:    embedopsv1.ReclaimPolicyRetain,
		RetainFor:        retainFor,
	}
	if decision.Digest, err = Digest(identity, decision); err != nil {
		return nil, err
	}
	return &Decision{Identity: identity, Decision: decision}, nil
}

// identityFor returns the identity of a server's cache, key included.
func identityFor(server *embedopsv1.EmbeddingServer, mode embedopsv1.CacheMode) (embedopsv1.CacheIdentity, error) {
	if server.Spec.Model.Name == "" {
		return embedopsv1.CacheIdentity{}, fmt.Errorf("%w: spec.model.name is required", ErrInvalidSpec)
	}
	domain, err := sharingDomain(mode, server.Namespace, server.Name)
	if err != nil {
		return embedopsv1.CacheIdentity{}, err
	}
	identity := embedopsv1.CacheIdentity{
		Model:         server.Spec.Model.Name,
		Revision:      revision(server.Spec.Model.Revision),
		SharingDomain: domain,
	}
	identity.Key = IdentityKey(identity)
	return identity, nil
}

// cacheMode checks the mode is known and defaults an empty one.
func cacheMode(mode embedopsv1.CacheMode) (embedopsv1.CacheMode, error) {
	switch mode {
	case "":
		return DefaultMode, nil
	case embedopsv1.CacheModePerReplica, embedopsv1.CacheModeShared, embedopsv1.CacheModeNone:
		return mode, nil
	default:
		return "", fmt.Errorf("%w: unknown spec.cache.mode %q", ErrInvalidSpec, mode)
	}
}

// revision defaults an empty model revision.
func revision(rev string) string {
	if rev == "" {
		return DefaultRevision
	}
	return rev
}

// sharingDomain is the namespace for Shared and "<namespace>/<name>" for
// PerReplica: who may mount the same cached data.
func sharingDomain(mode embedopsv1.CacheMode, namespace, name string) (string, error) {
	if namespace == "" {
		return "", fmt.Errorf("%w: metadata.namespace is required to decide the cache's sharing domain", ErrInvalidSpec)
	}
	if mode == embedopsv1.CacheModeShared {
		return namespace, nil
	}
	if name == "" {
		return "", fmt.Errorf("%w: metadata.name is required to decide a PerReplica cache's sharing domain", ErrInvalidSpec)
	}
	return namespace + "/" + name, nil
}

// cacheSize defaults an absent size, checks it, and returns it in the form a
// binding records.
func cacheSize(requested *resource.Quantity) (resource.Quantity, error) {
	size := resource.MustParse(DefaultSize)
	if requested != nil {
		size = *requested
	}
	if err := sizeInRange(size); err != nil {
		return resource.Quantity{}, fmt.Errorf("spec.cache.size: %w", err)
	}
	return recordedSize(size), nil
}

// sizeInRange checks a size is more than zero and fewer bytes than an int64
// holds, without expanding its exponent: "1e1000000000" is refused at once.
func sizeInRange(size resource.Quantity) error {
	if size.Sign() <= 0 {
		return fmt.Errorf("%w: a cache size must be greater than zero", ErrInvalidSpec)
	}
	copied := size.DeepCopy()
	dec := copied.AsDec()
	// value >= 2^(bits-1) * 10^-scale, and 10^19 > math.MaxInt64.
	if float64(dec.UnscaledBig().BitLen()-1)*math.Log10(2)-float64(dec.Scale()) > 19 ||
		copied.CmpInt64(math.MaxInt64) > 0 {
		return fmt.Errorf("%w: a cache size must be less than 8Ei", ErrInvalidSpec)
	}
	return nil
}

// recordedSize is the size in canonical binary-SI form: "10240Mi" -> "10Gi".
func recordedSize(size resource.Quantity) resource.Quantity {
	written, err := resource.ParseQuantity(formatted(size, resource.BinarySI))
	if err != nil {
		return size.DeepCopy()
	}
	return written
}

// formatted is the canonical string of the size's value in a given format.
func formatted(size resource.Quantity, format resource.Format) string {
	copied := size.DeepCopy()
	return resource.NewDecimalQuantity(*copied.AsDec(), format).String()
}

// MaxRetainFor is the longest retainFor admission accepts.
const MaxRetainFor = 8760 * time.Hour

// retention defaults an absent retainFor and refuses a negative one or one
// longer than MaxRetainFor, as admission does; an explicit 0s means release
// at once.
func retention(retainFor *metav1.Duration) (metav1.Duration, error) {
	switch {
	case retainFor == nil:
		return metav1.Duration{Duration: DefaultRetainFor}, nil
	case retainFor.Duration < 0:
		return metav1.Duration{}, fmt.Errorf("%w: spec.cache.retainFor %s must not be negative", ErrInvalidSpec, retainFor.Duration)
	case retainFor.Duration > MaxRetainFor:
		return metav1.Duration{}, fmt.Errorf("%w: spec.cache.retainFor %s must be at most %s", ErrInvalidSpec, retainFor.Duration, MaxRetainFor)
	default:
		return *retainFor, nil
	}
}

// accessModes are ReadWriteOnce for PerReplica and ReadWriteMany for Shared.
func accessModes(mode embedopsv1.CacheMode) []corev1.PersistentVolumeAccessMode {
	if mode == embedopsv1.CacheModeShared {
		return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	}
	return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

// ExistingClaimAccessModes are how servers mount an existing claim: every
// replica, read-only.
var ExistingClaimAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}

// existingClaimDecision records spec.cache.existingClaim: Shared (every
// replica mounts the one claim), shared in the namespace (servers naming
// the same claim and model share the binding), size 0 (the claim's own,
// not decided here), ExistingClaimAccessModes, and the claim's name, which
// the digest covers. The mode, size and class of the spec are not
// consulted: admission refuses those that contradict the claim, and the
// schema's defaults say nothing.
func existingClaimDecision(server *embedopsv1.EmbeddingServer) (*Decision, error) {
	identity, err := identityFor(server, embedopsv1.CacheModeShared)
	if err != nil {
		return nil, err
	}
	retainFor, err := retention(server.Spec.Cache.RetainFor)
	if err != nil {
		return nil, err
	}
	decision := embedopsv1.CacheDecision{
		Mode:          embedopsv1.CacheModeShared,
		Size:          resource.MustParse("0"),
		AccessModes:   slices.Clone(ExistingClaimAccessModes),
		ReclaimPolicy: embedopsv1.ReclaimPolicyRetain,
		RetainFor:     retainFor,
		ExistingClaim: server.Spec.Cache.ExistingClaim,
	}
	if decision.Digest, err = Digest(identity, decision); err != nil {
		return nil, err
	}
	return &Decision{Identity: identity, Decision: decision}, nil
}
