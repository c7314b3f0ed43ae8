package controller

import (
	"context"
	"fmt"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// defaultSnapshotClassAnnotation marks a driver's default
// VolumeSnapshotClass (external-snapshotter v8.7.0
// pkg/utils/util.go, IsDefaultSnapshotClassAnnotation).
const defaultSnapshotClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"

// seedCopy is how the binding's new claims are copied (decision.SeedCopy)
// and, for a snapshot, with which VolumeSnapshotClass.
type seedCopy struct {
	decision.SeedCopy
	snapshotClass string
}

// resolveSeedCopy decides how the server's new claims are copied: Clone
// clones; Snapshot and Auto snapshot with spec.cache.volumeSnapshotClassName
// or the VolumeSnapshotClass of the claims' driver (the binding's recorded
// provisioner), and Auto clones when there is none. A named class of
// another driver, or a Snapshot with no class, is refused: the replicas
// download. The classes are read uncached, only while an ordinal lacks its
// claim: the snapshot API is optional, and a cluster without it has no
// class.
func (r *EmbeddingServerReconciler) resolveSeedCopy(ctx context.Context, server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding) (seedCopy, error) {
	seed := server.Spec.Cache.Seed
	if seed == embedopsv1.CacheSeedClone {
		return seedCopy{SeedCopy: decision.SeedCopy{Method: embedopsv1.ClaimFilledByClone}}, nil
	}
	driver := binding.Spec.Decision.Provisioner
	named := server.Spec.Cache.VolumeSnapshotClassName
	class, why, err := r.snapshotClassFor(ctx, driver, named)
	if err != nil {
		return seedCopy{}, err
	}
	switch {
	case class != "":
		return seedCopy{SeedCopy: decision.SeedCopy{Method: embedopsv1.ClaimFilledBySnapshot}, snapshotClass: class}, nil
	case seed == embedopsv1.CacheSeedSnapshot || named != "":
		return seedCopy{SeedCopy: decision.SeedCopy{Method: embedopsv1.ClaimFilledBySnapshot, Refused: why}}, nil
	default:
		return seedCopy{SeedCopy: decision.SeedCopy{Method: embedopsv1.ClaimFilledByClone}}, nil
	}
}

// snapshotClassFor is the VolumeSnapshotClass of driver: the one named
// (which must be of driver), else the driver's default, else its only one.
// Without one, it says why.
func (r *EmbeddingServerReconciler) snapshotClassFor(ctx context.Context, driver, named string) (string, string, error) {
	var classes snapshotv1.VolumeSnapshotClassList
	err := r.apiReader.List(ctx, &classes)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return "", "the cluster serves no VolumeSnapshotClass (snapshot.storage.k8s.io/v1)", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("listing VolumeSnapshotClasses: %w", err)
	}
	if named != "" {
		return namedSnapshotClass(classes.Items, driver, named)
	}
	var ofDriver []string
	for _, class := range classes.Items {
		if class.Driver != driver {
			continue
		}
		if class.Annotations[defaultSnapshotClassAnnotation] == "true" {
			return class.Name, "", nil
		}
		ofDriver = append(ofDriver, class.Name)
	}
	switch len(ofDriver) {
	case 0:
		return "", fmt.Sprintf("no VolumeSnapshotClass names driver %s", driver), nil
	case 1:
		return ofDriver[0], "", nil
	default:
		return "", fmt.Sprintf("VolumeSnapshotClasses %v name driver %s and none is its default: set spec.cache.volumeSnapshotClassName", ofDriver, driver), nil
	}
}

// namedSnapshotClass checks that the class named exists and is of driver.
func namedSnapshotClass(classes []snapshotv1.VolumeSnapshotClass, driver, named string) (string, string, error) {
	for _, class := range classes {
		if class.Name != named {
			continue
		}
		if class.Driver != driver {
			return "", fmt.Sprintf("spec.cache.volumeSnapshotClassName %s is of driver %s, the claims' is %s", named, class.Driver, driver), nil
		}
		return named, "", nil
	}
	return "", fmt.Sprintf("spec.cache.volumeSnapshotClassName %s does not exist", named), nil
}

// seedSnapshotOf is the binding's VolumeSnapshot at commit as the API
// server has it, read uncached (the snapshot API is optional: no watch).
func (r *EmbeddingServerReconciler) seedSnapshotOf(ctx context.Context, binding *embedopsv1.ModelCacheBinding, commit string) (decision.SeedSnapshot, *snapshotv1.VolumeSnapshot, error) {
	state := decision.SeedSnapshot{Name: decision.SnapshotName(binding.Name, commit)}
	snapshot := &snapshotv1.VolumeSnapshot{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: binding.Namespace, Name: state.Name}, snapshot)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return state, nil, nil
	case err != nil:
		return state, nil, fmt.Errorf("reading VolumeSnapshot %s: %w", state.Name, err)
	}
	state.Exists, state.Deleting = true, snapshot.DeletionTimestamp != nil
	if status := snapshot.Status; status != nil {
		state.Ready = status.ReadyToUse != nil && *status.ReadyToUse
		if status.Error != nil && status.Error.Message != nil {
			state.Error = *status.Error.Message
		}
	}
	return state, snapshot, nil
}

// snapshotSource is the claim the binding's snapshot is, or is being,
// taken of; "" when unknown.
func (w *seedWrite) snapshotSource() string {
	switch {
	case w.plan.Snapshot != nil:
		return w.plan.Snapshot.Source
	case w.snapshot != nil && w.snapshot.Spec.Source.PersistentVolumeClaimName != nil:
		return *w.snapshot.Spec.Source.PersistentVolumeClaimName
	}
	return ""
}

// takeSnapshot takes the binding's VolumeSnapshot when the plan needs one:
// recorded on the binding first (spec.resources.volumeSnapshotNames), so a
// release deletes it even if this process dies right after, then created
// controlled by the binding, so deleting the binding deletes it too.
func (r *EmbeddingServerReconciler) takeSnapshot(ctx context.Context, scope *serverScope, write *seedWrite) error {
	take := write.plan.Snapshot
	if take == nil {
		return nil
	}
	if err := r.ledger.RecordSnapshot(ctx, scope.binding, take.Name); err != nil {
		return err
	}
	snapshot, err := bindingSnapshot(scope.binding, *take, write.snapshotClass, r.scheme)
	if err != nil {
		return err
	}
	if err := r.act.CreateSnapshot(ctx, snapshot); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("taking VolumeSnapshot %s of claim %s: %w", take.Name, take.Source, err)
	}
	write.snapshot = snapshot
	r.events.Eventf(scope.server, nil, corev1.EventTypeNormal, SeedingReplicaReason, "Seed",
		"Taking VolumeSnapshot %s of claim %s (VolumeSnapshotClass %s) at commit %s, to seed new replicas", take.Name, take.Source, write.snapshotClass, recordedCommit(scope.binding))
	return nil
}

// bindingSnapshot is the binding's VolumeSnapshot of a populated claim
// (snapshot.storage.k8s.io/v1, external-snapshotter v8.7.0
// client/apis/volumesnapshot/v1/types.go: spec.source names a claim of the
// snapshot's namespace, spec.volumeSnapshotClassName one of its driver),
// labelled with the binding's storage and controlled by the binding.
func bindingSnapshot(binding *embedopsv1.ModelCacheBinding, take decision.SeedClone, class string, scheme *runtime.Scheme) (*snapshotv1.VolumeSnapshot, error) {
	snapshot := &snapshotv1.VolumeSnapshot{}
	snapshot.Namespace, snapshot.Name = binding.Namespace, take.Name
	snapshot.Labels = map[string]string{embedopsv1.CacheBindingLabel: decision.StorageName(binding)}
	snapshot.Spec.Source.PersistentVolumeClaimName = &take.Source
	snapshot.Spec.VolumeSnapshotClassName = &class
	if err := controllerutil.SetControllerReference(binding, snapshot, scheme); err != nil {
		return nil, fmt.Errorf("owning VolumeSnapshot %s: %w", take.Name, err)
	}
	return snapshot, nil
}
