package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Tags open each canonical encoding; see the package documentation.
const (
	identityTag   = "embedops.dev/identity/v1"
	decisionTag   = "embedops.dev/decision/v1"
	parametersTag = "embedops.dev/storageclass-parameters/v1"
	digestPrefix  = "sha256:"
)

// IdentityKey returns the key of an identity's model, revision and sharing
// domain; identity.Key itself is ignored.
func IdentityKey(identity embedopsv1.CacheIdentity) string {
	e := newEncoding(identityTag)
	e.field("model", identity.Model)
	e.field("revision", identity.Revision)
	e.field("sharingDomain", identity.SharingDomain)
	return e.digest()
}

// Digest returns the digest of an identity and a decision, as recorded in a
// binding's spec. decision.Digest and the cluster facts are ignored, so a
// recorded binding can be checked against its own fields.
func Digest(identity embedopsv1.CacheIdentity, decision embedopsv1.CacheDecision) (string, error) {
	if err := recordable(identity, decision); err != nil {
		return "", err
	}
	e := newEncoding(decisionTag)
	e.field("model", identity.Model)
	e.field("revision", identity.Revision)
	e.field("sharingDomain", identity.SharingDomain)
	e.field("key", identity.Key)
	e.field("mode", string(decision.Mode))
	e.field("storageClassName", decision.StorageClassName)
	e.field("size", formatted(decision.Size, resource.DecimalExponent))
	e.list("accessModes", accessModeSet(decision.AccessModes))
	e.field("reclaimPolicy", string(decision.ReclaimPolicy))
	e.field("retainFor", decision.RetainFor.Duration.String())
	if decision.ExistingClaim != "" {
		// Only when set, so the digests of every other decision stay as
		// recorded.
		e.field("existingClaim", decision.ExistingClaim)
	}
	return e.digest(), nil
}

// recordable checks the fields a binding cannot be recorded without.
func recordable(identity embedopsv1.CacheIdentity, decision embedopsv1.CacheDecision) error {
	switch {
	case identity.Model == "" || identity.Revision == "" || identity.SharingDomain == "":
		return fmt.Errorf("%w: identity needs a model, a revision and a sharing domain", ErrInvalidSpec)
	case decision.Mode != embedopsv1.CacheModePerReplica && decision.Mode != embedopsv1.CacheModeShared:
		return fmt.Errorf("%w: decision mode %q is neither PerReplica nor Shared", ErrInvalidSpec, decision.Mode)
	case decision.RetainFor.Duration < 0:
		return fmt.Errorf("%w: decision retainFor %s must not be negative", ErrInvalidSpec, decision.RetainFor.Duration)
	}
	if decision.ExistingClaim != "" && decision.Size.IsZero() {
		return nil // the claim's own size: nothing to check.
	}
	if err := sizeInRange(decision.Size); err != nil {
		return fmt.Errorf("decision size: %w", err)
	}
	return nil
}

// accessModeSet returns the access modes sorted and without duplicates.
func accessModeSet(modes []corev1.PersistentVolumeAccessMode) []string {
	set := make([]string, 0, len(modes))
	for _, m := range modes {
		set = append(set, string(m))
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// ParametersDigest returns the digest of StorageClass parameters, keys sorted.
func ParametersDigest(parameters map[string]string) string {
	keys := make([]string, 0, len(parameters))
	for k := range parameters {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, k, parameters[k])
	}
	e := newEncoding(parametersTag)
	e.list("parameters", pairs)
	return e.digest()
}

// WithClusterFacts returns a copy of d with the StorageClass's provisioner and
// parameters digest recorded. The decision digest is unchanged: cluster facts
// are not derived from the manifest.
func WithClusterFacts(d *Decision, provisioner string, parameters map[string]string) *Decision {
	out := &Decision{Identity: d.Identity, Decision: *d.Decision.DeepCopy()}
	out.Decision.Provisioner = provisioner
	out.Decision.StorageClassParametersDigest = ParametersDigest(parameters)
	return out
}

// encoding is a canonical encoding under construction: netstrings in the
// order they are written.
type encoding struct {
	buf []byte
}

// newEncoding starts an encoding with its tag.
func newEncoding(tag string) *encoding {
	e := &encoding{}
	e.netstring(tag)
	return e
}

// netstring appends "<length>:<s>,".
func (e *encoding) netstring(s string) {
	e.buf = strconv.AppendInt(e.buf, int64(len(s)), 10)
	e.buf = append(e.buf, ':')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, ',')
}

// field appends a name and a string value.
func (e *encoding) field(name, value string) {
	e.netstring(name)
	e.netstring(value)
}

// list appends a name, the element count and each element.
func (e *encoding) list(name string, values []string) {
	e.netstring(name)
	e.netstring(strconv.Itoa(len(values)))
	for _, v := range values {
		e.netstring(v)
	}
}

// digest is "sha256:" and the hex SHA-256 of the encoding.
func (e *encoding) digest() string {
	sum := sha256.Sum256(e.buf)
	return digestPrefix + hex.EncodeToString(sum[:])
}
