package chaos

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// CatchUp waits until the recorder has seen the current state of every
// binding and claim of the namespace, so that UnsafeClaimDeletions judges
// with every write made so far.
func (r *Recorder) CatchUp(ctx context.Context, c client.Reader, namespace string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, retryInterval, timeout, true, func(ctx context.Context) (bool, error) {
		last = r.caughtUp(ctx, c, namespace)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the recorder to catch up: %w (last: %w)", err, last)
	}
	return nil
}

// caughtUp compares a fresh list with what the recorder saw.
func (r *Recorder) caughtUp(ctx context.Context, c client.Reader, namespace string) error {
	var bindings embedopsv1.ModelCacheBindingList
	var claims corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
		return err
	}
	if err := c.List(ctx, &claims, client.InNamespace(namespace)); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	present := map[types.UID]bool{}
	for _, b := range bindings.Items {
		present[b.UID] = true
		rv, _ := parseRV(b.ResourceVersion)
		h, ok := r.bindings[b.UID]
		if !ok || h.samples[len(h.samples)-1].rv < rv {
			return fmt.Errorf("binding %s at rv %d not seen yet", b.Name, rv)
		}
	}
	for uid, h := range r.bindings {
		if !present[uid] && !h.gone() {
			return fmt.Errorf("deletion of binding %s not seen yet", h.name)
		}
	}
	return r.claimsCaughtUp(claims.Items)
}

// claimsCaughtUp compares listed claims with what the recorder saw.
func (r *Recorder) claimsCaughtUp(claims []corev1.PersistentVolumeClaim) error {
	present := map[types.UID]bool{}
	for _, claim := range claims {
		present[claim.UID] = true
		rv, _ := parseRV(claim.ResourceVersion)
		if seen, ok := r.claims[claim.UID]; !ok || seen.rv < rv {
			return fmt.Errorf("claim %s at rv %d not seen yet", claim.Name, rv)
		}
		if _, seen := r.deletions[claim.UID]; claim.DeletionTimestamp != nil && !seen {
			return fmt.Errorf("deletion of claim %s not seen yet", claim.Name)
		}
	}
	for uid, seen := range r.claims {
		if _, deleted := r.deletions[uid]; !present[uid] && !deleted {
			return fmt.Errorf("deletion of claim %s not seen yet", seen.name)
		}
	}
	return nil
}
