package ledger

import (
	"context"
	"fmt"
	"slices"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// RecordSnapshot adds a VolumeSnapshot to the binding's
// spec.resources.volumeSnapshotNames before it is taken, so a release
// deletes it whatever happens after.
func (l *Ledger) RecordSnapshot(ctx context.Context, binding *embedopsv1.ModelCacheBinding, name string) error {
	if slices.Contains(binding.Spec.Resources.VolumeSnapshotNames, name) {
		return nil
	}
	binding.Spec.Resources.VolumeSnapshotNames = append(binding.Spec.Resources.VolumeSnapshotNames, name)
	if err := l.client.Update(ctx, binding, client.FieldOwner(embedopsv1.FieldManager)); err != nil {
		return fmt.Errorf("recording VolumeSnapshot %s on binding %s: %w", name, binding.Name, err)
	}
	l.written.Record(client.ObjectKeyFromObject(binding), binding.ResourceVersion)
	return nil
}

// releaseSnapshots deletes the binding's VolumeSnapshots that still exist
// and that it controls, read from the API server so the preconditions name
// each as it is, and returns how many remain: snapshot-controller keeps one
// a restore still reads (external-snapshotter v8.7.0, the
// snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection
// finalizer), and the binding is Released only once they are gone. One it
// does not control is reported and left alone. A cluster that no longer
// serves the snapshot API has none left.
func (l *Ledger) releaseSnapshots(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (int, error) {
	remaining := 0
	for _, name := range binding.Spec.Resources.VolumeSnapshotNames {
		snapshot := &snapshotv1.VolumeSnapshot{}
		err := l.apiReader.Get(ctx, types.NamespacedName{Namespace: binding.Namespace, Name: name}, snapshot)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading VolumeSnapshot %s: %w", name, err)
		}
		if controller := metav1.GetControllerOfNoCopy(snapshot); controller == nil || controller.UID != binding.UID {
			l.events.Eventf(binding, nil, corev1.EventTypeWarning, embedopsv1.SnapshotNotOwnedReason, "Release",
				"left VolumeSnapshot %s alone: the binding does not control it", name)
			continue
		}
		remaining++
		if !snapshot.DeletionTimestamp.IsZero() {
			continue
		}
		if err := l.deleteSnapshot(ctx, binding, snapshot); err != nil {
			return 0, err
		}
	}
	return remaining, nil
}

// deleteSnapshot deletes a snapshot as it was read (UID and
// resourceVersion preconditions) and reports it.
func (l *Ledger) deleteSnapshot(ctx context.Context, binding *embedopsv1.ModelCacheBinding, snapshot *snapshotv1.VolumeSnapshot) error {
	preconditions := client.Preconditions{UID: &snapshot.UID, ResourceVersion: &snapshot.ResourceVersion}
	err := l.client.Delete(ctx, snapshot, preconditions)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting VolumeSnapshot %s: %w", snapshot.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted cache snapshot", "binding", binding.Name, "snapshot", snapshot.Name)
	l.events.Eventf(binding, nil, corev1.EventTypeNormal, embedopsv1.SnapshotDeletedReason, "Release",
		"deleted VolumeSnapshot %s", snapshot.Name)
	return nil
}
