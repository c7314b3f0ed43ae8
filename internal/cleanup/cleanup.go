package cleanup

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/watch"
)

// DefaultControllerNamespace is where config/default installs the
// controller and its leader-election lease.
const DefaultControllerNamespace = "embedops-system"

// ErrControllerRunning means a controller holds the leader lease: cleaning
// up under it would race with its reconciles.
var ErrControllerRunning = errors.New("an embedops controller holds the leader lease")

// Options say what an uninstall cleanup covers.
type Options struct {
	// Namespace limits the cleanup; empty means every namespace.
	Namespace string
	// LeaseNamespace is where the controller's leader lease lives.
	LeaseNamespace string
	// Force cleans up even while a controller holds the lease.
	Force bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Report says what a cleanup did.
type Report struct {
	// BindingsDeleted are "<namespace>/<name>" of the deleted bindings.
	BindingsDeleted []string
	// ServersReleased are servers whose finalizer was removed.
	ServersReleased []string
	// ClaimsOrphaned are claims the deleted bindings owned, kept with their data.
	ClaimsOrphaned []string
}

// Run prepares an uninstall: it deletes every ModelCacheBinding with
// its finalizer removed, orphaning (never deleting) the claims they own,
// and removes the server finalizer, so deleting the CRDs or namespaces
// afterwards cannot hang. It refuses while a controller holds the leader
// lease, unless forced.
func Run(ctx context.Context, c client.Client, opts Options) (Report, error) {
	if !opts.Force {
		if err := checkNoLeader(ctx, c, opts); err != nil {
			return Report{}, err
		}
	}
	var report Report
	var bindings embedopsv1.ModelCacheBindingList
	if err := c.List(ctx, &bindings, client.InNamespace(opts.Namespace)); err != nil {
		return report, fmt.Errorf("listing bindings: %w", err)
	}
	for i := range bindings.Items {
		binding := &bindings.Items[i]
		if err := releaseBinding(ctx, c, binding); err != nil {
			return report, err
		}
		report.BindingsDeleted = append(report.BindingsDeleted, binding.Namespace+"/"+binding.Name)
		for _, claim := range binding.Spec.Resources.PersistentVolumeClaimNames {
			report.ClaimsOrphaned = append(report.ClaimsOrphaned, binding.Namespace+"/"+claim)
		}
	}
	var servers embedopsv1.EmbeddingServerList
	if err := c.List(ctx, &servers, client.InNamespace(opts.Namespace)); err != nil {
		return report, fmt.Errorf("listing servers: %w", err)
	}
	for i := range servers.Items {
		server := &servers.Items[i]
		if err := removeFinalizer(ctx, c, server, embedopsv1.ServerFinalizer); err != nil {
			return report, err
		}
		report.ServersReleased = append(report.ServersReleased, server.Namespace+"/"+server.Name)
	}
	return report, nil
}

// checkNoLeader refuses when a controller's lease, the main one's or a
// shard's (watch.ShardLeaderElectionID), is held and unexpired.
func checkNoLeader(ctx context.Context, c client.Client, opts Options) error {
	namespace := opts.LeaseNamespace
	if namespace == "" {
		namespace = DefaultControllerNamespace
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing the leader leases in %s: %w", namespace, err)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	for i := range leases.Items {
		lease := &leases.Items[i]
		if !isControllerLease(lease.Name) {
			continue
		}
		if holder, held := leaseHeld(lease, now()); held {
			return fmt.Errorf("%w (%s, lease %s/%s): stop the controller first, or pass --force", ErrControllerRunning, holder, namespace, lease.Name)
		}
	}
	return nil
}

// isControllerLease reports whether a lease is watch.LeaderElectionID or a
// shard's, watch.LeaderElectionID suffixed by leaderelection.GenerateID with "-"
// and eight hex digits.
func isControllerLease(name string) bool {
	suffix, found := strings.CutPrefix(name, watch.LeaderElectionID+"-")
	if !found {
		return name == watch.LeaderElectionID
	}
	_, err := hex.DecodeString(suffix)
	return len(suffix) == 8 && err == nil
}

// leaseHeld reports the holder of a lease renewed within its duration.
func leaseHeld(lease *coordinationv1.Lease, now time.Time) (string, bool) {
	spec := lease.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity == "" || spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return "", false
	}
	expires := spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second)
	return *spec.HolderIdentity, now.Before(expires)
}

// releaseBinding deletes a binding, orphaning its claims, and removes its
// finalizer so the deletion completes without the controller.
func releaseBinding(ctx context.Context, c client.Client, binding *embedopsv1.ModelCacheBinding) error {
	err := c.Delete(ctx, binding, client.PropagationPolicy(metav1.DeletePropagationOrphan))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting binding %s/%s: %w", binding.Namespace, binding.Name, err)
	}
	return removeFinalizer(ctx, c, binding, embedopsv1.CacheProtectionFinalizer)
}

// removeFinalizer patches one finalizer away from a fresh read of obj,
// retrying when the object changes under the patch.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if !controllerutil.ContainsFinalizer(obj, finalizer) {
			return nil
		}
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(obj, finalizer)
		return c.Patch(ctx, obj, patch)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s from %s/%s: %w", finalizer, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
