package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	snapshotlisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// external-snapshotter's names (pkg/utils/util.go) that the sidecar reads
// and writes.
const (
	// contentFinalizer is the finalizer the snapshot-controller puts on
	// every VolumeSnapshotContent and the sidecar removes once the snapshot
	// is deleted from the storage.
	contentFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	// annBeingCreated marks a content whose CreateSnapshot is under way.
	annBeingCreated = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
	// annBeingDeleted is set by the snapshot-controller on a content whose
	// snapshot is deleted; the sidecar deletes the snapshot then.
	annBeingDeleted = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
	// snapshotNamePrefix is csi-snapshotter's --snapshot-name-prefix
	// default: a snapshot is named snapshot-<VolumeSnapshot UID>.
	snapshotNamePrefix = "snapshot"
)

// snapshotWorkers is csi-snapshotter's --worker-threads default.
const snapshotWorkers = 10

// snapshotter plays kubernetes-csi/external-snapshotter's csi-snapshotter
// sidecar (pkg/sidecar-controller, v8.7.0) and the CreateSnapshot and
// DeleteSnapshot of the driver behind it, as csi-driver-host-path's: it
// follows the VolumeSnapshotContents of the driver's names that the real
// snapshot-controller creates, copies the source volume's directory into a
// snapshot directory (`cp -a`, where csi-driver-host-path writes a tar
// file), and sets the content's status: snapshotHandle (the directory),
// readyToUse, restoreSize (the source volume's capacity, as
// csi-driver-host-path reports) and creationTime. A content whose
// VolumeSnapshotClass sets NeverReadyParameter gets a handle and readyToUse
// false, and nothing more. When the snapshot-controller marks a content for
// deletion (deletionPolicy Delete), it removes the directory, clears the
// status and removes the content's finalizer, as the sidecar does.
// Pre-provisioned contents (spec.source.snapshotHandle) are left alone.
type snapshotter struct {
	driver   *volumeDriver
	contents snapshotlisters.VolumeSnapshotContentLister
	classes  snapshotlisters.VolumeSnapshotClassLister
	queue    workqueue.TypedRateLimitingInterface[string]
	logger   logr.Logger
}

// runSnapshotter runs the sidecar for the driver's names until stop is
// called; stop returns once its workers have.
func runSnapshotter(driver *volumeDriver, logger logr.Logger) (stop func(), err error) {
	factory := snapshotinformers.NewSharedInformerFactory(driver.snapshotClient, 0)
	contents := factory.Snapshot().V1().VolumeSnapshotContents()
	classes := factory.Snapshot().V1().VolumeSnapshotClasses()
	s := &snapshotter{
		driver:   driver,
		contents: contents.Lister(),
		classes:  classes.Lister(),
		// Retries within seconds, as the provisioner's.
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](250*time.Millisecond, 5*time.Second)),
		logger: logger,
	}
	enqueue := func(obj any) {
		if content, ok := obj.(*snapshotv1.VolumeSnapshotContent); ok && driver.serves(content.Spec.Driver) {
			s.queue.Add(content.Name)
		}
	}
	if _, err := contents.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching VolumeSnapshotContents: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	for informer, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			cancel()
			factory.Shutdown()
			return nil, fmt.Errorf("the %v informer did not sync", informer)
		}
	}
	var workers sync.WaitGroup
	for range snapshotWorkers {
		workers.Go(func() {
			for s.next(ctx) {
			}
		})
	}
	return func() {
		cancel()
		s.queue.ShutDown()
		workers.Wait()
		factory.Shutdown()
	}, nil
}

// next handles one content off the queue; false once the queue is shut
// down.
func (s *snapshotter) next(ctx context.Context) bool {
	name, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(name)
	if err := s.sync(ctx, name); err != nil {
		s.logger.Error(err, "syncing a VolumeSnapshotContent", "content", name)
		s.queue.AddRateLimited(name)
		return true
	}
	s.queue.Forget(name)
	return true
}

// sync is the sidecar's syncContent.
func (s *snapshotter) sync(ctx context.Context, name string) error {
	content, err := s.contents.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !s.driver.serves(content.Spec.Driver) {
		return nil
	}
	if shouldDeleteContent(content) {
		if content.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && content.Status != nil && content.Status.SnapshotHandle != nil {
			if err := s.deleteSnapshot(ctx, content); err != nil {
				return err
			}
		}
		return s.removeFinalizer(ctx, content.Name)
	}
	if content.DeletionTimestamp != nil || content.Spec.Source.VolumeHandle == nil {
		return nil
	}
	status := content.Status
	switch {
	case status != nil && status.ReadyToUse != nil && *status.ReadyToUse:
		if metav1.HasAnnotation(content.ObjectMeta, annBeingCreated) {
			return s.setBeingCreated(ctx, content.Name, false)
		}
		return nil
	case status != nil && status.SnapshotHandle != nil:
		// A snapshot the driver answered not ready (NeverReadyParameter):
		// the sidecar would ask again; the answer would not change.
		return nil
	}
	if err := s.createSnapshot(ctx, content); err != nil {
		// The driver's errors are final: nothing is left under way, so the
		// being-created annotation goes, as the sidecar removes it then.
		message := fmt.Sprintf("Failed to create snapshot: failed to take snapshot of the volume %s: %q", *content.Spec.Source.VolumeHandle, err.Error())
		return errors.Join(err, s.setError(ctx, content.Name, message), s.setBeingCreated(ctx, content.Name, false))
	}
	return nil
}

// shouldDeleteContent is the sidecar's shouldDelete: a content being
// deleted whose snapshot the snapshot-controller marked as being deleted,
// and whose CreateSnapshot is not under way.
func shouldDeleteContent(content *snapshotv1.VolumeSnapshotContent) bool {
	if content.DeletionTimestamp == nil {
		return false
	}
	if content.Spec.Source.SnapshotHandle != nil && content.Spec.VolumeSnapshotRef.UID == "" {
		return true
	}
	if metav1.HasAnnotation(content.ObjectMeta, annBeingCreated) {
		return false
	}
	return metav1.HasAnnotation(content.ObjectMeta, annBeingDeleted)
}

// createSnapshot is CreateSnapshot: it copies the source volume's directory
// into the snapshot's, unless the class says the snapshot never becomes
// ready, and records the snapshot in the content's status.
func (s *snapshotter) createSnapshot(ctx context.Context, content *snapshotv1.VolumeSnapshotContent) error {
	if content.Spec.VolumeSnapshotClassName == nil {
		return fmt.Errorf("failed to take snapshot %s without a snapshot class", content.Name)
	}
	class, err := s.classes.Get(*content.Spec.VolumeSnapshotClassName)
	if err != nil {
		return fmt.Errorf("failed to get input parameters to create snapshot for content %s: %w", content.Name, err)
	}
	if content.Spec.VolumeSnapshotRef.UID == "" {
		return fmt.Errorf("cannot create snapshot. Snapshot content %s not bound to a snapshot", content.Name)
	}
	source := *content.Spec.Source.VolumeHandle
	if !within(s.driver.volumes, source) {
		return fmt.Errorf("volume %s is not one of the driver's volumes", source)
	}
	volume, err := s.driver.clientset.CoreV1().PersistentVolumes().Get(ctx, filepath.Base(source), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the source volume: %w", err)
	}
	if err := s.setBeingCreated(ctx, content.Name, true); err != nil {
		return err
	}
	handle := filepath.Join(s.driver.snapshots, snapshotNamePrefix+"-"+string(content.Spec.VolumeSnapshotRef.UID))
	ready := class.Parameters[NeverReadyParameter] != "true"
	if ready {
		if err := s.copySnapshot(ctx, source, handle); err != nil {
			return err
		}
	}
	size := volume.Spec.Capacity.Storage().Value()
	created := time.Now().UnixNano()
	err = s.updateStatus(ctx, content.Name, func(status *snapshotv1.VolumeSnapshotContentStatus) {
		status.SnapshotHandle, status.ReadyToUse, status.CreationTime = &handle, &ready, &created
		if size > 0 {
			status.RestoreSize = &size
		}
		if ready {
			status.Error = nil
		}
	})
	if err != nil {
		return err
	}
	s.logger.Info("created a snapshot", "content", content.Name, "volume", source, "snapshot", handle, "readyToUse", ready)
	return s.setBeingCreated(ctx, content.Name, false)
}

// copySnapshot copies the volume's directory into a new snapshot
// directory, replacing what an earlier, failed attempt left.
func (s *snapshotter) copySnapshot(ctx context.Context, volume, handle string) error {
	if err := os.RemoveAll(handle); err != nil {
		return err
	}
	if err := os.Mkdir(handle, 0o700); err != nil {
		return fmt.Errorf("creating the snapshot directory: %w", err)
	}
	if err := copyTree(ctx, volume, handle); err != nil {
		return errors.Join(fmt.Errorf("failed create snapshot: %w", err), os.RemoveAll(handle))
	}
	return nil
}

// deleteSnapshot is DeleteSnapshot: it removes the snapshot's directory and
// clears the content's status, as the sidecar's deleteCSISnapshotOperation
// does.
func (s *snapshotter) deleteSnapshot(ctx context.Context, content *snapshotv1.VolumeSnapshotContent) error {
	handle := *content.Status.SnapshotHandle
	if !within(s.driver.snapshots, handle) {
		return fmt.Errorf("snapshot %s is not one of the driver's snapshots", handle)
	}
	if err := os.RemoveAll(handle); err != nil {
		return fmt.Errorf("failed to delete snapshot %s: %w", content.Name, err)
	}
	s.logger.Info("deleted a snapshot", "content", content.Name, "snapshot", handle)
	return s.updateStatus(ctx, content.Name, func(status *snapshotv1.VolumeSnapshotContentStatus) {
		status.SnapshotHandle, status.ReadyToUse, status.CreationTime, status.RestoreSize = nil, nil, nil, nil
	})
}

// updateStatus changes the content's status, read live.
func (s *snapshotter) updateStatus(ctx context.Context, name string, change func(*snapshotv1.VolumeSnapshotContentStatus)) error {
	contents := s.driver.snapshotClient.SnapshotV1().VolumeSnapshotContents()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		content, err := contents.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if content.Status == nil {
			content.Status = &snapshotv1.VolumeSnapshotContentStatus{}
		}
		change(content.Status)
		_, err = contents.UpdateStatus(ctx, content, metav1.UpdateOptions{})
		return err
	})
}

// setError records a failed CreateSnapshot in the content's status, which
// the snapshot-controller copies to the VolumeSnapshot's.
func (s *snapshotter) setError(ctx context.Context, name, message string) error {
	return s.updateStatus(ctx, name, func(status *snapshotv1.VolumeSnapshotContentStatus) {
		status.ReadyToUse = new(false)
		status.Error = &snapshotv1.VolumeSnapshotError{Time: &metav1.Time{Time: time.Now()}, Message: &message}
	})
}

// setBeingCreated sets or removes the being-created annotation.
func (s *snapshotter) setBeingCreated(ctx context.Context, name string, set bool) error {
	return s.updateContent(ctx, name, func(content *snapshotv1.VolumeSnapshotContent) bool {
		if metav1.HasAnnotation(content.ObjectMeta, annBeingCreated) == set {
			return false
		}
		if set {
			metav1.SetMetaDataAnnotation(&content.ObjectMeta, annBeingCreated, "yes")
		} else {
			delete(content.Annotations, annBeingCreated)
		}
		return true
	})
}

// removeFinalizer removes the snapshot-controller's finalizer, after which
// the API server deletes the content.
func (s *snapshotter) removeFinalizer(ctx context.Context, name string) error {
	return s.updateContent(ctx, name, func(content *snapshotv1.VolumeSnapshotContent) bool {
		finalizers, changed := withFinalizer(content.Finalizers, contentFinalizer, false)
		content.Finalizers = finalizers
		return changed
	})
}

// updateContent applies change to the content read live and updates it
// when change reports a change; a content already gone is no error.
func (s *snapshotter) updateContent(ctx context.Context, name string, change func(*snapshotv1.VolumeSnapshotContent) bool) error {
	contents := s.driver.snapshotClient.SnapshotV1().VolumeSnapshotContents()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		content, err := contents.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !change(content) {
			return nil
		}
		_, err = contents.Update(ctx, content, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
