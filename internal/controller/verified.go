package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// verifiedChildren remembers, per server UID, the children as they were
// when an apply last changed nothing: the digest of the desired children
// and, per child, the digest of its cached copy without status,
// resourceVersion and managedFields. While the spec builds the same
// children and the cache shows every child unchanged, the reconcile skips
// the uncached ownership check and ssa's drift check (a GET and a dry-run
// PATCH per child), so a steady reconcile makes no request for its
// children. Any change to a child but its status reaches the cache and
// changes its digest; a deleted child leaves it; both bring the full
// check back. A status update (the StatefulSet controller's, every
// rollout step) does not. It is safe for concurrent use.
type verifiedChildren struct {
	states sync.Map // types.UID -> verifiedState
}

// verifiedState is what one server's last unchanged apply saw.
type verifiedState struct {
	desired string
	cached  map[string]string // inventory ID -> childDigest
	// created are the children that apply created, at appliedAt: until the
	// cache shows them, a reconcile waits for it (createdCacheWait) rather
	// than checking every child uncached.
	created   map[string]bool
	appliedAt time.Time
	// generation is the server's generation that apply handled.
	generation int64
}

// createdCacheWait is how long a reconcile waits for the cache to show the
// children the last apply created before it checks them all uncached. The
// cache normally shows them within a second, and their arrival is an
// event (Owns) that brings the server back at once; the wait only bounds a
// child deleted before the cache saw it.
const createdCacheWait = 10 * time.Second

// forget drops what is remembered of a server.
func (v *verifiedChildren) forget(server types.UID) {
	v.states.Delete(server)
}

// appliedGeneration is the server generation the last remembered apply
// handled, 0 when none is remembered.
func (v *verifiedChildren) appliedGeneration(server types.UID) int64 {
	value, ok := v.states.Load(server)
	if !ok {
		return 0
	}
	return value.(verifiedState).generation
}

// childrenUnchanged reports whether every child the server's spec names
// is in the cache exactly as the last unchanged apply found it; else, when
// the cache only lacks children that apply created a moment ago, how long
// to wait for it (behind).
func (r *EmbeddingServerReconciler) childrenUnchanged(server *embedopsv1.EmbeddingServer, seen *observed, named []embedopsv1.ResourceRef) (unchanged bool, behind time.Duration, err error) {
	value, ok := r.verified.states.Load(server.UID)
	if !ok {
		return false, 0, nil
	}
	state := value.(verifiedState)
	if len(named) != len(state.cached) {
		return false, 0, nil
	}
	cached, missing, err := cachedChildren(seen, named)
	if err != nil {
		return false, 0, err
	}
	if len(missing) > 0 {
		return false, state.cacheBehind(missing), nil
	}
	return maps.EqualFunc(cached, state.cached, func(child cachedChild, digest string) bool { return child.digest == digest }), 0, nil
}

// cacheBehind is how much longer to wait for the cache to show the missing
// children: zero unless this state's apply created all of them less than
// createdCacheWait ago.
func (s verifiedState) cacheBehind(missing []string) time.Duration {
	for _, id := range missing {
		if !s.created[id] {
			return 0
		}
	}
	return max(createdCacheWait-time.Since(s.appliedAt), 0)
}

// desiredUnchanged reports whether the desired children are those the
// last unchanged apply of the server applied.
func (r *EmbeddingServerReconciler) desiredUnchanged(server types.UID, children []*unstructured.Unstructured) (bool, error) {
	value, ok := r.verified.states.Load(server)
	if !ok {
		return false, nil
	}
	desired, err := digestOf(children)
	return err == nil && desired == value.(verifiedState).desired, err
}

// rememberApply records what an apply that changed nothing but create
// children found: a child ssa found unchanged from the cache, when the
// cache shows it at the resourceVersion the ownership check read just
// before the apply (the state ssa found no drift in), and a child
// createChildren created as the API server answered its apply (applying
// the same object again changes nothing; the cache shows it so once it
// has caught up). An apply that changed an existing child, or a cache that
// differs from that read, leaves nothing remembered, so the next reconcile
// checks in full.
func (r *EmbeddingServerReconciler) rememberApply(scope *serverScope, changes *ssa.ChangeSet) error {
	server := scope.server
	r.verified.forget(server.UID)
	for _, entry := range changes.Entries {
		id := inventoryRef(entry.ObjMetadata.Namespace, entry.ObjMetadata.Name, entry.ObjMetadata.GroupKind.WithVersion(entry.GroupVersion)).ID
		if entry.Action != ssa.UnchangedAction && scope.created[id] == nil {
			return nil
		}
	}
	desired, err := digestOf(scope.children)
	if err != nil {
		return err
	}
	var found []embedopsv1.ResourceRef
	digests := make(map[string]string, len(server.Status.Inventory.Entries))
	for _, entry := range server.Status.Inventory.Entries {
		created, ok := scope.created[entry.ID]
		if !ok {
			found = append(found, entry)
			continue
		}
		if digests[entry.ID], err = createdDigest(r.scheme, created); err != nil {
			return err
		}
	}
	cached, missing, err := cachedChildren(scope.observed, found)
	if err != nil || len(missing) > 0 {
		return err
	}
	for id, child := range cached {
		if child.resourceVersion != scope.liveVersions[id] {
			return nil
		}
		digests[id] = child.digest
	}
	created := make(map[string]bool, len(scope.created))
	for id := range scope.created {
		created[id] = true
	}
	r.verified.states.Store(server.UID, verifiedState{desired: desired, cached: digests, created: created, appliedAt: time.Now(), generation: server.Generation})
	return nil
}

// createdDigest is the childDigest the cache will give a child created as
// applied: the API server's answer, in the typed form the cache holds.
func createdDigest(scheme *runtime.Scheme, applied *unstructured.Unstructured) (string, error) {
	typed, err := scheme.New(applied.GroupVersionKind())
	if err != nil {
		return "", fmt.Errorf("child %s: %w", applied.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, typed); err != nil {
		return "", fmt.Errorf("converting %s: %w", applied.GetName(), err)
	}
	return childDigest(typed.(client.Object))
}

// cachedChild is what verifiedChildren keeps of a cached child.
type cachedChild struct {
	digest, resourceVersion string
}

// cachedChildren are the digests and resourceVersions of the children refs
// name, as observe saw them, by inventory ID, and the IDs of those the
// cache did not hold.
func cachedChildren(seen *observed, refs []embedopsv1.ResourceRef) (map[string]cachedChild, []string, error) {
	children := make(map[string]cachedChild, len(refs))
	var missing []string
	for _, ref := range refs {
		child, ok := seen.child(ref.ID)
		if !ok {
			missing = append(missing, ref.ID)
			continue
		}
		digest, err := childDigest(child)
		if err != nil {
			return nil, nil, err
		}
		children[ref.ID] = cachedChild{digest: digest, resourceVersion: child.GetResourceVersion()}
	}
	return children, missing, nil
}

// childDigest hashes a child without what changes when nothing of ours
// does: its status, resourceVersion and managedFields, and the apiVersion
// and kind of a StatefulSet's claim templates, which a JSON answer carries
// and a protobuf one (the informer's) does not.
func childDigest(child client.Object) (string, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(child)
	if err != nil {
		return "", fmt.Errorf("converting %s: %w", child.GetName(), err)
	}
	delete(content, "status")
	unstructured.RemoveNestedField(content, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(content, "metadata", "managedFields")
	if templates, found, _ := unstructured.NestedSlice(content, "spec", "volumeClaimTemplates"); found {
		for _, template := range templates {
			if fields, ok := template.(map[string]any); ok {
				delete(fields, "apiVersion")
				delete(fields, "kind")
			}
		}
		if err := unstructured.SetNestedSlice(content, templates, "spec", "volumeClaimTemplates"); err != nil {
			return "", fmt.Errorf("normalizing %s: %w", child.GetName(), err)
		}
	}
	return digestOf(content)
}

// digestOf is the SHA-256 of v's JSON, whose map keys encoding/json sorts.
func digestOf(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
