package builder

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Where the model cache lives in the TEI container.
const (
	// CacheVolumeName names the cache volume when it is a pod volume (Shared
	// and None). A PerReplica cache is named by Cache.TemplateName instead.
	CacheVolumeName = "cache"
	// CacheMountPath is where the cache is mounted; HUGGINGFACE_HUB_CACHE
	// points at it.
	CacheMountPath = "/data"
)

// Cache is where a server's model cache lives, as the controller decided it.
// A nil *Cache means CacheModeNone.
type Cache struct {
	// Mode is PerReplica, Shared or None (an emptyDir).
	Mode embedopsv1.CacheMode
	// Binding names the binding that recorded the decision; the pods carry
	// it in embedopsv1.CacheBindingLabel.
	Binding string
	// TemplateName is the PerReplica volumeClaimTemplates entry; it carries
	// the decision digest, so a new decision gives new claims.
	TemplateName string
	// ClaimName is the Shared ReadWriteMany claim of the binding, or the
	// user's claim when Existing.
	ClaimName string
	// Existing: ClaimName is spec.cache.existingClaim, a Shared cache the
	// user filled and owns. Every pod mounts it read-only; the Job
	// PopulateJob builds only verifies it (--verify-only), offline; TEI runs
	// the spec's revision, never a pinned commit (see pinnedCommit).
	Existing bool
	// StorageClassName is the PerReplica claims' StorageClass; empty means
	// the cluster default.
	StorageClassName string
	// Size is the PerReplica claims' requested storage.
	Size resource.Quantity
	// AccessModes are the PerReplica claims' access modes.
	AccessModes []corev1.PersistentVolumeAccessMode
	// PopulatorImage runs `embedops populate`: as the PerReplica init
	// container PopulateContainerName, which fills each replica's claim, or
	// as the Shared claim's PopulateJob, which the controller runs before the
	// StatefulSet. Either way TEI then finds the files it reads in the cache
	// and asks the hub for none. Empty means TEI downloads the model itself.
	PopulatorImage string
	// ResolvedCommit is the model commit the binding recorded, empty until
	// a populator recorded one. With a populator, TEI and the populate init
	// container then run --revision=<ResolvedCommit>, so every replica
	// serves those weights even when the branch moves.
	ResolvedCommit string
}

// commitPattern is a full git commit id, as a binding records it.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// errInvalidCache marks a Cache the controller filled wrongly: a bug, not a
// user error.
var errInvalidCache = errors.New("invalid cache")

// validate checks that the fields of the cache's mode are set and the others
// are not.
func (c *Cache) validate() error {
	if c == nil {
		return nil
	}
	var problems []string
	switch c.Mode {
	case embedopsv1.CacheModePerReplica:
		if c.Existing {
			problems = append(problems, "existing must be false: an existing claim is mounted as a Shared one")
		}
		problems = append(problems, dnsLabel("templateName", c.TemplateName)...)
		problems = append(problems, unset("claimName", c.ClaimName)...)
		if c.Size.Sign() <= 0 {
			problems = append(problems, "size must be greater than zero")
		}
		if len(c.AccessModes) == 0 {
			problems = append(problems, "accessModes must not be empty")
		}
	case embedopsv1.CacheModeShared:
		problems = append(problems, dnsSubdomain("claimName", c.ClaimName)...)
		problems = append(problems, unset("templateName", c.TemplateName)...)
	case embedopsv1.CacheModeNone:
		if c.Existing {
			problems = append(problems, "existing must be false")
		}
		problems = append(problems, unset("templateName", c.TemplateName)...)
		problems = append(problems, unset("claimName", c.ClaimName)...)
		problems = append(problems, unset("populatorImage", c.PopulatorImage)...)
	default:
		problems = append(problems, fmt.Sprintf("unknown mode %q", c.Mode))
	}
	if c.ResolvedCommit != "" && !commitPattern.MatchString(c.ResolvedCommit) {
		problems = append(problems, fmt.Sprintf("resolvedCommit %q is not a commit id", c.ResolvedCommit))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: mode %s: %s", errInvalidCache, c.Mode, strings.Join(problems, "; "))
	}
	return nil
}

func dnsLabel(field, value string) []string {
	if value == "" {
		return []string{field + " is required"}
	}
	if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
		return []string{field + ": " + strings.Join(errs, ", ")}
	}
	return nil
}

func dnsSubdomain(field, value string) []string {
	if value == "" {
		return []string{field + " is required"}
	}
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		return []string{field + ": " + strings.Join(errs, ", ")}
	}
	return nil
}

func unset(field, value string) []string {
	if value != "" {
		return []string{field + " must be empty"}
	}
	return nil
}

// podLabels are the labels the cache adds to the pod template.
func (c *Cache) podLabels() map[string]string {
	if c == nil || c.Binding == "" {
		return nil
	}
	return map[string]string{embedopsv1.CacheBindingLabel: c.Binding}
}

// claimLabels are the labels of a PerReplica claim: the server's owner
// labels, so the controller's cache sees it, the binding's name, so the
// binding recognises the claim as its own before it deletes it, and the
// application name. No GitOps tracking key (TrackingKeys): the StatefulSet
// controller gives claims of a Retain policy no owner reference, and Argo
// CD takes every ownerless object whose app.kubernetes.io/instance names an
// Application as that Application's own (gitops-engine v0.7.3
// pkg/cache/cluster.go, GetManagedLiveObjs: `isManaged(o) &&
// len(o.OwnerRefs) == 0`), so it would prune the cache with it.
func (c *Cache) claimLabels(server *embedopsv1.EmbeddingServer) map[string]string {
	labels := Labels(server)
	for _, key := range TrackingKeys {
		delete(labels, key)
	}
	maps.Copy(labels, c.podLabels())
	return labels
}

// mode returns the cache mode; nil means None.
func (c *Cache) mode() embedopsv1.CacheMode {
	if c == nil {
		return embedopsv1.CacheModeNone
	}
	return c.Mode
}

// populates reports whether the pod runs the populate init container.
func (c *Cache) populates() bool {
	return c.mode() == embedopsv1.CacheModePerReplica && c.PopulatorImage != ""
}

// Populated reports whether embedops fills the cache before TEI starts:
// per replica in an init container, or once for a Shared claim in a
// PopulateJob.
func (c *Cache) Populated() bool {
	return c.mode() != embedopsv1.CacheModeNone && c.PopulatorImage != ""
}

// pinnedCommit is the commit TEI and the populator run on, once a
// populator recorded one; "" otherwise.
func (c *Cache) pinnedCommit() string {
	if !c.Populated() || c.Existing {
		// An existing claim is read-only and the user's: nothing writes the
		// refs/<commit> TEI's hf-hub would need to find the snapshot by
		// its commit (hf-hub src/lib.rs, CacheRepo::get reads
		// refs/<revision>), so TEI runs the revision the verify Job found
		// in refs.
		return ""
	}
	return c.ResolvedCommit
}

// volumeName is the name of the volume mounted at CacheMountPath.
func (c *Cache) volumeName() string {
	if c.mode() == embedopsv1.CacheModePerReplica {
		return c.TemplateName
	}
	return CacheVolumeName
}

// volumeMount mounts the cache at CacheMountPath.
func (c *Cache) volumeMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: c.volumeName(), MountPath: CacheMountPath, ReadOnly: c.readOnly()}
}

// readOnly reports whether the cache is mounted read-only: an existing
// claim is the user's data, and neither TEI nor the verify Job writes it.
func (c *Cache) readOnly() bool {
	return c != nil && c.Existing
}

// podVolumes are the pod's cache volumes; a PerReplica cache has none, its
// volume comes from the claim template.
func (c *Cache) podVolumes() []corev1.Volume {
	switch c.mode() {
	case embedopsv1.CacheModeShared:
		return []corev1.Volume{{
			Name: CacheVolumeName,
			VolumeSource: corev1.VolumeSource{
				// ReadOnly forces every mount of the claim read-only
				// (k8s.io/api core/v1 types.go,
				// PersistentVolumeClaimVolumeSource.ReadOnly).
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.ClaimName, ReadOnly: c.readOnly()},
			},
		}}
	case embedopsv1.CacheModeNone:
		return []corev1.Volume{{
			Name:         CacheVolumeName,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		}}
	default:
		return nil
	}
}

// claimTemplates are the StatefulSet's volumeClaimTemplates: one per-replica
// cache claim, or none.
func (c *Cache) claimTemplates(server *embedopsv1.EmbeddingServer) []corev1.PersistentVolumeClaim {
	if c.mode() != embedopsv1.CacheModePerReplica {
		return nil
	}
	claim := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: c.TemplateName, Labels: c.claimLabels(server)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: append([]corev1.PersistentVolumeAccessMode(nil), c.AccessModes...),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: c.Size.DeepCopy()},
			},
		},
	}
	if c.StorageClassName != "" {
		claim.Spec.StorageClassName = new(c.StorageClassName)
	}
	return []corev1.PersistentVolumeClaim{claim}
}

// claimRetention keeps PerReplica claims when the StatefulSet is deleted or
// scaled down: the binding, not the StatefulSet, owns the data's lifetime.
func (c *Cache) claimRetention() *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	if c.mode() != embedopsv1.CacheModePerReplica {
		return nil
	}
	return &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
}
