package decision

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// FirstReferenceWindow is how much longer the server with uid may leave
// unwritten its first reference of binding, before anyone looks at the
// claims: the rest of wait since the binding's creation at now, when the
// binding is the server's first storage (AwaitsFirstReference, and the
// server's children mount no other binding: inUse is its
// status.cacheBinding). Zero means the reference is written now. Within
// the window the ledger waits only while the claims are not all Bound
// (BindingReadiness), so that the reference writes the binding's Ready
// first status, and the binding controller need not write it again.
func FirstReferenceWindow(binding *embedopsv1.ModelCacheBinding, uid types.UID, inUse string, wait time.Duration, now time.Time) time.Duration {
	if wait <= 0 || !AwaitsFirstReference(binding, uid) || (inUse != "" && inUse != binding.Name) {
		return 0
	}
	return max(binding.CreationTimestamp.Add(wait).Sub(now), 0)
}
