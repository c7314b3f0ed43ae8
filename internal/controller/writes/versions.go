// Package writes remembers the resourceVersion of each object's last write
// by this process, so that a reader can tell a cached copy that has not
// caught up with that write yet and read the object from the API server.
package writes

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Versions holds, per object of one resource, the resourceVersion of the
// last write this process made. resourceVersions of one resource compare as
// integers (k8s.io/apimachinery/pkg/util/resourceversion). Its zero value
// is empty; it is safe for concurrent use.
type Versions struct {
	versions sync.Map // types.NamespacedName -> string
}

// Record remembers a write of the object at resourceVersion rv; an older
// write answered late does not replace a newer one.
func (v *Versions) Record(key types.NamespacedName, rv string) {
	if rv == "" {
		return
	}
	if last, ok := v.versions.Load(key); ok {
		if c, err := resourceversion.CompareResourceVersion(rv, last.(string)); err == nil && c <= 0 {
			return
		}
	}
	v.versions.Store(key, rv)
}

// Forget drops what is remembered of an object that is gone.
func (v *Versions) Forget(key types.NamespacedName) {
	v.versions.Delete(key)
}

// Behind reports whether a copy of the object at resourceVersion rv is
// older than the last write; a resourceVersion that does not compare counts
// as behind, so the caller reads the object from the API server.
func (v *Versions) Behind(key types.NamespacedName, rv string) bool {
	last, ok := v.versions.Load(key)
	if !ok {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(rv, last.(string))
	return err != nil || c < 0
}
