package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// The harness's storage plays a CSI driver on directories of the test
// machine: its provisioners are the driver's controller side behind
// external-provisioner (sig-storage-lib-external-provisioner, in the test
// process), its volumes are CSI PersistentVolumes whose volumeHandle is
// their directory, and snapshotter.go plays the csi-snapshotter sidecar
// beside the real snapshot-controller (snapshots.go). A claim whose
// dataSource (or dataSourceRef) names a PersistentVolumeClaim is a clone, as
// csi-driver-host-path clones (pkg/hostpath CreateVolume, `cp -a` of the
// source's directory); one that names a VolumeSnapshot is a restore of the
// snapshot's directory. Both are refused as external-provisioner v6.3.0
// (pkg/controller/controller.go, prepareProvision, getPVCSource,
// getSnapshotSource) refuses them, with its words.

// The knobs the controller tests use, on both the kwok cluster and the real
// node.
const (
	// NoCloneStorageClass is a StorageClass whose driver
	// (NoCloneProvisionerName on kwok, LocalNoCloneProvisionerName on the
	// real node) reports no CLONE_VOLUME capability: a claim of this class
	// with a PersistentVolumeClaim source stays Pending, with the
	// ProvisioningFailed event external-provisioner gives. It snapshots and
	// restores from its own snapshots (NoCloneSnapshotClass).
	NoCloneStorageClass = "no-clone"
	// DefaultSnapshotClass is the default VolumeSnapshotClass of the
	// cluster's main driver (ProvisionerName on kwok, LocalProvisionerName
	// on the real node): deletionPolicy Delete.
	DefaultSnapshotClass = "standard"
	// NoCloneSnapshotClass is the default VolumeSnapshotClass of the driver
	// without clone support.
	NoCloneSnapshotClass = "no-clone"
	// NeverReadySnapshotClass is a VolumeSnapshotClass of the main driver
	// whose snapshots never become readyToUse, as a backend's that is still
	// cutting them: it sets NeverReadyParameter.
	NeverReadySnapshotClass = "never-ready"
	// NeverReadyParameter, "true" among a VolumeSnapshotClass's parameters,
	// has the harness's driver answer every snapshot of the class with a
	// handle and readyToUse false, and never finish it.
	NeverReadyParameter = "embedops.dev/never-ready"
)

// external-provisioner's names (pkg/controller/controller.go).
const (
	// pvcCloneFinalizer protects a claim being cloned.
	pvcCloneFinalizer = "provisioner.storage.kubernetes.io/cloning-protection"
	// snapshotSourceFinalizer protects a snapshot being restored.
	snapshotSourceFinalizer = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"
	pvcKind                 = "PersistentVolumeClaim"
	snapshotKind            = "VolumeSnapshot"
)

// volumeDriver is what both provisioners share: where volumes and snapshots
// live, which of the driver names may clone, and the clients that read a
// claim's data source.
type volumeDriver struct {
	// name reports CLONE_VOLUME; noClone, served by the same provisioner,
	// does not. Both report CREATE_DELETE_SNAPSHOT.
	name, noClone string
	// volumes holds a directory per volume, named after it; snapshots a
	// directory per snapshot.
	volumes, snapshots string
	clientset          kubernetes.Interface
	snapshotClient     snapshotclient.Interface
	logger             logr.Logger

	mu sync.Mutex
	// holds counts the provisioning operations copying from each source,
	// which carries external-provisioner's protection finalizer meanwhile.
	holds map[string]int
}

// newVolumeDriver creates the volumes and snapshots directories under dir
// for the driver name and its namesake without clone support (each driver
// reports its capabilities, not each class).
func newVolumeDriver(name, noClone, dir string, clientset kubernetes.Interface, snapshots snapshotclient.Interface, logger logr.Logger) (*volumeDriver, error) {
	d := &volumeDriver{
		name: name, noClone: noClone,
		volumes: filepath.Join(dir, "volumes"), snapshots: filepath.Join(dir, "snapshots"),
		clientset: clientset, snapshotClient: snapshots, logger: logger,
		holds: map[string]int{},
	}
	for _, path := range []string{d.volumes, d.snapshots} {
		if err := os.MkdirAll(path, 0o750); err != nil {
			return nil, fmt.Errorf("creating the storage directory %s: %w", path, err)
		}
	}
	return d, nil
}

// drivers are the driver names the provisioner and the snapshotter serve.
func (d *volumeDriver) drivers() []string { return []string{d.name, d.noClone} }

// volumeSource is the CSI source of the volume in path for the class's
// driver: its handle is the directory.
func volumeSource(options controller.ProvisionOptions, path string) corev1.PersistentVolumeSource {
	return corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
		Driver:       options.StorageClass.Provisioner,
		VolumeHandle: path,
	}}
}

// VolumeDir is the directory holding a volume of the harness's storage: its
// CSI volumeHandle. Pods are simulated on kwok, so a test that needs a
// populated volume there writes into this directory.
func VolumeDir(volume *corev1.PersistentVolume) (string, error) {
	if volume.Spec.CSI == nil || !filepath.IsAbs(volume.Spec.CSI.VolumeHandle) {
		return "", fmt.Errorf("the volume %s is not one of the harness's CSI volumes", volume.Name)
	}
	return volume.Spec.CSI.VolumeHandle, nil
}

// volumePath returns the directory of a volume of this driver, or an
// IgnoredError for any other volume.
func (d *volumeDriver) volumePath(volume *corev1.PersistentVolume) (string, error) {
	source := volume.Spec.CSI
	if source == nil || !d.serves(source.Driver) || !within(d.volumes, source.VolumeHandle) {
		return "", &controller.IgnoredError{Reason: "the volume is not under the provisioner's directory"}
	}
	return source.VolumeHandle, nil
}

// serves reports whether driver is one of this driver's names.
func (d *volumeDriver) serves(driver string) bool { return driver == d.name || driver == d.noClone }

// within reports whether path names an entry directly under dir.
func within(dir, path string) bool {
	return filepath.IsAbs(path) && filepath.Dir(filepath.Clean(path)) == dir
}

// contentSource is where a new volume's content comes from: the directory
// of a claim's volume or of a snapshot, held (protected by
// external-provisioner's finalizer) until release.
type contentSource struct {
	kind, namespace, name string
	dir                   string
	release               func()
}

// prepareSource checks the claim's data source as external-provisioner's
// prepareProvision does before it asks the driver for a volume, and returns
// the content to copy into it: nil for a claim without a data source. The
// errors are external-provisioner's, which the library reports as the
// claim's ProvisioningFailed events; the claim stays Pending and is
// retried. A kind other than PersistentVolumeClaim and VolumeSnapshot is
// left to a populator, as external-provisioner leaves it.
func (d *volumeDriver) prepareSource(ctx context.Context, options controller.ProvisionOptions) (*contentSource, controller.ProvisioningState, error) {
	claim, class := options.PVC, options.StorageClass
	source, err := dataSource(claim)
	if err != nil || source == nil {
		return nil, controller.ProvisioningFinished, err
	}
	if source.Name == "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("the PVC source not found for PVC %s", claim.Name)
	}
	switch source.Kind {
	case snapshotKind:
		if source.APIVersion != snapshotv1.GroupName {
			return nil, controller.ProvisioningFinished, fmt.Errorf("the PVC source does not belong to the right APIGroup. Expected %s, Got %s", snapshotv1.GroupName, source.APIVersion)
		}
	case pvcKind:
		// external-provisioner checks the driver's capabilities before
		// anything of the source.
		if class.Provisioner != d.name {
			return nil, controller.ProvisioningFinished, errors.New("CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported")
		}
	default:
		return nil, controller.ProvisioningFinished, &controller.IgnoredError{
			Reason: fmt.Sprintf("data source (%s) is not handled by the provisioner, assuming an external populator will provision it", source.Kind),
		}
	}
	if claim.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("claim Selector is not supported")
	}
	var dir string
	if source.Kind == pvcKind {
		dir, err = d.claimSource(ctx, claim, class, source)
	} else {
		dir, err = d.snapshotSource(ctx, claim, class, source)
	}
	if err != nil {
		return nil, controller.ProvisioningNoChange, fmt.Errorf("error getting handle for DataSource Type %s by Name %s: %w", source.Kind, source.Name, err)
	}
	release, err := d.hold(ctx, source)
	if err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	return &contentSource{kind: source.Kind, namespace: source.Namespace, name: source.Name, dir: dir, release: release}, controller.ProvisioningFinished, nil
}

// dataSource is the claim's data source as external-provisioner reads it
// (dataSource, else dataSourceRef), nil without one. The kube-apiserver
// fills each from the other for the core kinds.
func dataSource(claim *corev1.PersistentVolumeClaim) (*corev1.ObjectReference, error) {
	var source corev1.ObjectReference
	switch {
	case claim.Spec.DataSource != nil:
		ref := claim.Spec.DataSource
		source = corev1.ObjectReference{Kind: ref.Kind, Name: ref.Name, Namespace: claim.Namespace}
		if ref.APIGroup != nil {
			source.APIVersion = *ref.APIGroup
		}
	case claim.Spec.DataSourceRef != nil:
		ref := claim.Spec.DataSourceRef
		if ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != claim.Namespace {
			// The CrossNamespaceVolumeDataSource gate is off here, as it is
			// by default in external-provisioner and the kube-apiserver.
			return nil, errors.New("dataSourceRef namespace specified but the CrossNamespaceVolumeDataSource feature is disabled")
		}
		source = corev1.ObjectReference{Kind: ref.Kind, Name: ref.Name, Namespace: claim.Namespace}
		if ref.APIGroup != nil {
			source.APIVersion = *ref.APIGroup
		}
	default:
		return nil, nil
	}
	return &source, nil
}

// claimSource checks a clone's source claim as getPVCSource does and
// returns its volume's directory. Since external-provisioner v3.2.0 a clone
// may be of another StorageClass, so long as its driver is the same; the
// source must be bound, not being deleted, and request no more than the
// clone. A source of another driver gets external-provisioner's vague
// "claim in dataSource not bound or invalid", the reason in the
// provisioner's log as in external-provisioner's.
func (d *volumeDriver) claimSource(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, ref *corev1.ObjectReference) (string, error) {
	source, err := d.clientset.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("error getting PVC %s (namespace %q) from api server: %w", ref.Name, claim.Namespace, err)
	}
	if source.Status.Phase != corev1.ClaimBound {
		return "", fmt.Errorf("the PVC DataSource %s must have a status of Bound.  Got %v", ref.Name, source.Status)
	}
	if source.DeletionTimestamp != nil {
		return "", fmt.Errorf("the PVC DataSource %s is currently being deleted", ref.Name)
	}
	if source.Spec.StorageClassName == nil {
		return "", fmt.Errorf("the source PVC (%s) storageclass cannot be empty", source.Name)
	}
	if claim.Spec.StorageClassName == nil {
		return "", fmt.Errorf("the requested PVC (%s) storageclass cannot be empty", claim.Name)
	}
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	sourceSize := source.Spec.Resources.Requests[corev1.ResourceStorage]
	if requested.Value() < sourceSize.Value() {
		return "", fmt.Errorf("error, new PVC request must be greater than or equal in size to the specified PVC data source, requested %v but source is %v", requested.Value(), sourceSize.Value())
	}
	if source.Spec.VolumeName == "" {
		return "", fmt.Errorf("volume name is empty in source PVC %s", source.Name)
	}
	invalid := func(reason string, args ...any) (string, error) {
		d.logger.Info("refusing a clone: "+fmt.Sprintf(reason, args...), "claim", claim.Namespace+"/"+claim.Name, "source", source.Name)
		return "", errors.New("claim in dataSource not bound or invalid")
	}
	volume, err := d.clientset.CoreV1().PersistentVolumes().Get(ctx, source.Spec.VolumeName, metav1.GetOptions{})
	switch {
	case err != nil:
		return invalid("error getting volume %s: %v", source.Spec.VolumeName, err)
	case volume.Spec.CSI == nil:
		return invalid("the source volume %s is not a CSI volume", volume.Name)
	case volume.Spec.CSI.Driver != class.Provisioner:
		return invalid("the source volume %s is handled by a different CSI driver (%s) than requested by StorageClass %s (%s)", volume.Name, volume.Spec.CSI.Driver, class.Name, class.Provisioner)
	case volume.Spec.ClaimRef == nil:
		return invalid("the source volume %s is not bound", volume.Name)
	case volume.Spec.ClaimRef.UID != source.UID || volume.Spec.ClaimRef.Namespace != source.Namespace || volume.Spec.ClaimRef.Name != source.Name:
		return invalid("the source volume %s is bound to a different PVC than requested", volume.Name)
	case volume.Status.Phase != corev1.VolumeBound:
		return invalid("the source volume %s status is %q, should instead be %q", volume.Name, volume.Status.Phase, corev1.VolumeBound)
	}
	if err := sameVolumeMode(claim.Spec.VolumeMode, volume.Spec.VolumeMode); err != nil {
		return "", err
	}
	if !within(d.volumes, volume.Spec.CSI.VolumeHandle) {
		return invalid("the source volume %s is not under the driver's directory", volume.Name)
	}
	return volume.Spec.CSI.VolumeHandle, nil
}

// sameVolumeMode refuses a clone that changes the volume mode.
func sameVolumeMode(claim, source *corev1.PersistentVolumeMode) error {
	block := func(mode *corev1.PersistentVolumeMode) bool {
		return mode != nil && *mode == corev1.PersistentVolumeBlock
	}
	switch {
	case !block(claim) && block(source):
		return errors.New("the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Block, but new PVC requested Filesystem")
	case block(claim) && !block(source):
		return errors.New("the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Filesystem, but new PVC requested Block")
	}
	return nil
}

// snapshotSource checks a restore's snapshot as getSnapshotSource does and
// returns the snapshot's directory: bound to a content of the class's
// driver, readyToUse, with a handle, and no larger than the claim.
func (d *volumeDriver) snapshotSource(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, ref *corev1.ObjectReference) (string, error) {
	snapshot, err := d.snapshotClient.SnapshotV1().VolumeSnapshots(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("error getting snapshot %s from api server: %w", ref.Name, err)
	}
	if snapshot.DeletionTimestamp != nil && !hasFinalizer(snapshot.Finalizers, snapshotSourceFinalizer) {
		return "", fmt.Errorf("snapshot %s is being deleted", ref.Name)
	}
	if snapshot.Status == nil || snapshot.Status.BoundVolumeSnapshotContentName == nil {
		return "", fmt.Errorf("snapshot %s not bound", ref.Name)
	}
	contentName := *snapshot.Status.BoundVolumeSnapshotContentName
	content, err := d.snapshotClient.SnapshotV1().VolumeSnapshotContents().Get(ctx, contentName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("error getting snapshotcontent %s for snapshot %s", contentName, ref.Name)
	}
	bound := content.Spec.VolumeSnapshotRef
	if bound.UID != snapshot.UID || bound.Namespace != snapshot.Namespace || bound.Name != snapshot.Name {
		return "", fmt.Errorf("snapshotcontent %s for snapshot %s is bound to a different snapshot", contentName, ref.Name)
	}
	if content.Spec.Driver != class.Provisioner {
		return "", fmt.Errorf("snapshotcontent %s for snapshot %s is not handled by CSI driver of StorageClass %s", contentName, ref.Name, class.Name)
	}
	if snapshot.Status.ReadyToUse == nil || !*snapshot.Status.ReadyToUse {
		return "", fmt.Errorf("snapshot %s is not Ready", ref.Name)
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil {
		return "", fmt.Errorf("snapshot handle %s is not available", ref.Name)
	}
	if size := snapshot.Status.RestoreSize; size != nil {
		requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if requested.Value() < size.Value() {
			return "", fmt.Errorf("requested volume size %d is less than the size %d for the source snapshot %s", requested.Value(), size.Value(), snapshot.Name)
		}
	}
	if mode := content.Spec.SourceVolumeMode; mode != nil && claim.Spec.VolumeMode != nil && *mode != *claim.Spec.VolumeMode {
		return "", fmt.Errorf("requested volume %s/%s modifies the mode of the source volume but does not have permission to do so. "+
			"snapshot.storage.kubernetes.io/allow-volume-mode-change annotation is not present on snapshotcontent %s", claim.Namespace, claim.Name, content.Name)
	}
	handle := *content.Status.SnapshotHandle
	if !within(d.snapshots, handle) {
		return "", fmt.Errorf("snapshot handle %s is not one of the driver's snapshots", handle)
	}
	return handle, nil
}

// hold puts external-provisioner's protection finalizer on the source (the
// claim's cloning-protection, the snapshot's
// volumesnapshot-as-source-protection) while a volume is filled from it;
// release takes it off once no provisioning copies from it. (external-
// provisioner keeps a claim's until no clone of it is Pending, and takes a
// snapshot's off once the restored volume is created.)
func (d *volumeDriver) hold(ctx context.Context, source *corev1.ObjectReference) (release func(), err error) {
	key := source.Kind + "/" + source.Namespace + "/" + source.Name
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.holds[key] == 0 {
		if err := d.setFinalizer(ctx, source, true); err != nil {
			return nil, err
		}
	}
	d.holds[key]++
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.holds[key]--; d.holds[key] > 0 {
			return
		}
		delete(d.holds, key)
		// The context of the provisioning may have ended with it.
		if err := d.setFinalizer(context.Background(), source, false); err != nil {
			d.logger.Error(err, "removing the protection finalizer", "source", key)
		}
	}, nil
}

// setFinalizer adds or removes the protection finalizer of the source.
func (d *volumeDriver) setFinalizer(ctx context.Context, source *corev1.ObjectReference, add bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if source.Kind == pvcKind {
			claims := d.clientset.CoreV1().PersistentVolumeClaims(source.Namespace)
			claim, err := claims.Get(ctx, source.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if finalizers, changed := withFinalizer(claim.Finalizers, pvcCloneFinalizer, add); changed {
				claim.Finalizers = finalizers
				_, err = claims.Update(ctx, claim, metav1.UpdateOptions{})
			}
			return err
		}
		snapshots := d.snapshotClient.SnapshotV1().VolumeSnapshots(source.Namespace)
		snapshot, err := snapshots.Get(ctx, source.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if finalizers, changed := withFinalizer(snapshot.Finalizers, snapshotSourceFinalizer, add); changed {
			snapshot.Finalizers = finalizers
			_, err = snapshots.Update(ctx, snapshot, metav1.UpdateOptions{})
		}
		return err
	})
	// A source gone before its finalizer is taken off needs none.
	if err != nil && (add || !apierrors.IsNotFound(err)) {
		return fmt.Errorf("updating the protection finalizer of %s %s/%s: %w", source.Kind, source.Namespace, source.Name, err)
	}
	return nil
}

// withFinalizer returns finalizers with or without finalizer, and whether
// that changed them.
func withFinalizer(finalizers []string, finalizer string, add bool) ([]string, bool) {
	has := hasFinalizer(finalizers, finalizer)
	switch {
	case add && !has:
		return append(finalizers, finalizer), true
	case !add && has:
		var kept []string
		for _, f := range finalizers {
			if f != finalizer {
				kept = append(kept, f)
			}
		}
		return kept, true
	}
	return finalizers, false
}

func hasFinalizer(finalizers []string, finalizer string) bool {
	for _, f := range finalizers {
		if f == finalizer {
			return true
		}
	}
	return false
}

// fill copies the source's content into the new volume's directory and
// releases the source.
func (s *contentSource) fill(ctx context.Context, path string) error {
	if s == nil {
		return nil
	}
	defer s.release()
	if err := copyTree(ctx, s.dir, path); err != nil {
		return fmt.Errorf("failed pre-populate data from %s %s: %w", strings.ToLower(s.kind), s.name, err)
	}
	return nil
}

// done releases a source that was not copied from.
func (s *contentSource) done() {
	if s != nil {
		s.release()
	}
}

// copyTree copies the content of the directory from into the directory to,
// as csi-driver-host-path copies a volume (`cp -a from/. to/`): modes,
// owners, timestamps, symlinks as they are (the model cache's relative
// links from snapshots/ to blobs/), hard links. A full sized volume fails
// the copy with ENOSPC, as a full disk would.
func copyTree(ctx context.Context, from, to string) error {
	out, err := exec.CommandContext(ctx, "cp", "-a", "--", from+"/.", to+"/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s/. %s/: %w: %s", from, to, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// csiDrivers are the CSIDriver objects of the driver's names, as a CSI
// driver's deployment installs them: nothing to attach, the kubelet applies
// fsGroup to the volume's files (fsGroupPolicy File, as for a local
// volume), persistent volumes only.
func csiDrivers(names ...string) []*storagev1.CSIDriver {
	var drivers []*storagev1.CSIDriver
	for _, name := range names {
		drivers = append(drivers, &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.CSIDriverSpec{
				AttachRequired:       new(false),
				PodInfoOnMount:       new(false),
				FSGroupPolicy:        new(storagev1.FileFSGroupPolicy),
				VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
			},
		})
	}
	return drivers
}

// snapshotClasses are the VolumeSnapshotClasses of a driver and of its
// driver without clone support: DefaultSnapshotClass and
// NoCloneSnapshotClass, each its driver's default, and
// NeverReadySnapshotClass; all deletionPolicy Delete.
func snapshotClasses(driver, noClone string) []*snapshotv1.VolumeSnapshotClass {
	class := func(name, driver string, isDefault bool, parameters map[string]string) *snapshotv1.VolumeSnapshotClass {
		c := &snapshotv1.VolumeSnapshotClass{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			Driver:         driver,
			Parameters:     parameters,
			DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
		}
		if isDefault {
			c.Annotations = map[string]string{"snapshot.storage.kubernetes.io/is-default-class": "true"}
		}
		return c
	}
	return []*snapshotv1.VolumeSnapshotClass{
		class(DefaultSnapshotClass, driver, true, nil),
		class(NoCloneSnapshotClass, noClone, true, nil),
		class(NeverReadySnapshotClass, driver, false, map[string]string{NeverReadyParameter: "true"}),
	}
}

// createStorageObjects creates the classes, the CSIDriver objects and the
// VolumeSnapshotClasses of a cluster's storage.
func createStorageObjects(ctx context.Context, clientset kubernetes.Interface, snapshots snapshotclient.Interface, classes []*storagev1.StorageClass, drivers []*storagev1.CSIDriver, snapshotClasses []*snapshotv1.VolumeSnapshotClass) error {
	for _, class := range classes {
		if _, err := clientset.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the StorageClass %s: %w", class.Name, err)
		}
	}
	for _, driver := range drivers {
		if _, err := clientset.StorageV1().CSIDrivers().Create(ctx, driver, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the CSIDriver %s: %w", driver.Name, err)
		}
	}
	for _, class := range snapshotClasses {
		if _, err := snapshots.SnapshotV1().VolumeSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the VolumeSnapshotClass %s: %w", class.Name, err)
		}
	}
	return nil
}
