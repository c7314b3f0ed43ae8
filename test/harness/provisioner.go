package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// The local cluster's storage.
const (
	// ProvisionerName is the provisioner of DefaultStorageClass, a CSI
	// driver that clones and snapshots. A CSI driver's name is a DNS
	// subdomain (the CSIDriver object's name, a PersistentVolume's
	// spec.csi.driver), so it has no slash.
	ProvisionerName = "test-provisioner.embedops.dev"
	// NoCloneProvisionerName is the provisioner of NoCloneStorageClass on
	// kwok: the same driver without the CLONE_VOLUME capability.
	NoCloneProvisionerName = "test-provisioner-no-clone.embedops.dev"
	// DefaultStorageClass is the default StorageClass: it binds claims
	// immediately and deletes their volumes with them.
	DefaultStorageClass = "standard"
)

// supportedAccessModes are the access modes the test provisioner accepts.
var supportedAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}

// provisionWorkers is how many claims are provisioned at once:
// kubernetes-csi/external-provisioner's --worker-threads default.
const provisionWorkers = 100

// hostPathProvisioner provisions a CSI PersistentVolume of a directory for
// each claim (storage.go), cloned or restored from the claim's data source.
// Pods are simulated, so nothing ever mounts it; the directory holds what a
// clone, a snapshot or a test put there, and shows that Delete ran.
type hostPathProvisioner struct {
	driver *volumeDriver
	// delay is how long each volume takes to provision, as a storage
	// backend's create call does; a claim binds that much after it is
	// picked up.
	delay time.Duration
}

// Provision creates the claim's directory, fills it from the claim's data
// source, and returns its volume; the library adds the claimRef, the class
// and the provisioned-by annotation.
func (p *hostPathProvisioner) Provision(ctx context.Context, options controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	claim := options.PVC
	if err := p.wait(ctx); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	source, state, err := p.driver.prepareSource(ctx, options)
	if err != nil {
		return nil, state, err
	}
	if claim.Spec.Selector != nil {
		source.done()
		return nil, controller.ProvisioningFinished, errors.New("claim selectors are not supported")
	}
	for _, mode := range claim.Spec.AccessModes {
		if !slices.Contains(supportedAccessModes, mode) {
			source.done()
			return nil, controller.ProvisioningFinished, fmt.Errorf("access mode %s is not supported", mode)
		}
	}
	path := filepath.Join(p.driver.volumes, options.PVName)
	if err := os.MkdirAll(path, 0o750); err != nil {
		source.done()
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating the volume directory: %w", err)
	}
	if err := source.fill(ctx, path); err != nil {
		return nil, controller.ProvisioningFinished, errors.Join(err, os.RemoveAll(path))
	}
	volume := volumeFor(options, volumeSource(options, path))
	volume.Spec.MountOptions = options.StorageClass.MountOptions
	return volume, controller.ProvisioningFinished, nil
}

// wait blocks for the provisioning delay, as a storage backend's create call
// would, holding one of the provisioner's workers.
func (p *hostPathProvisioner) wait(ctx context.Context) error {
	if p.delay <= 0 {
		return nil
	}
	timer := time.NewTimer(p.delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("provisioning interrupted: %w", ctx.Err())
	}
}

// Delete removes the volume's directory, ignoring volumes outside the
// driver's directory.
func (p *hostPathProvisioner) Delete(_ context.Context, volume *corev1.PersistentVolume) error {
	path, err := p.driver.volumePath(volume)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("removing the volume directory: %w", err)
	}
	return nil
}

// defaultStorageClass is DefaultStorageClass: the cluster's default class,
// served by ProvisionerName.
func defaultStorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        DefaultStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       ProvisionerName,
		ReclaimPolicy:     new(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: new(storagev1.VolumeBindingImmediate),
	}
}

// noCloneStorageClass is NoCloneStorageClass on kwok: as the default class,
// of the driver without clone support.
func noCloneStorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: NoCloneStorageClass},
		Provisioner:       NoCloneProvisionerName,
		ReclaimPolicy:     new(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: new(storagev1.VolumeBindingImmediate),
	}
}

// startProvisioner runs the test provisioner for the driver's names until
// stop is called; stop returns once the controller and its workers have.
// It logs to logger, which should not be the test's output: the library is
// chatty.
func startProvisioner(clientset kubernetes.Interface, driver *volumeDriver, delay time.Duration, logger logr.Logger) (stop func()) {
	return runProvisioner(clientset, driver, &hostPathProvisioner{driver: driver, delay: delay}, logger)
}

// runProvisioner runs a provisioner under the driver's names until stop is
// called; stop returns once the controller and its workers have.
func runProvisioner(clientset kubernetes.Interface, driver *volumeDriver, p controller.Provisioner, logger logr.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
	provisioner := controller.NewProvisionController(ctx, clientset, driver.name, p,
		controller.AdditionalProvisionerNames([]string{driver.noClone}),
		controller.Threadiness(provisionWorkers),
		// One process, one provisioner: leader election only delays the
		// start, and losing the lease would exit the test binary.
		controller.LeaderElection(false),
		// Retry failures within seconds rather than backing off for minutes.
		controller.RateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](250*time.Millisecond, 5*time.Second)),
	)
	var workers sync.WaitGroup
	provisioner.ControllerWaitGroup(&workers)
	done := make(chan struct{})
	go func() {
		defer close(done)
		provisioner.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		workers.Wait()
	}
}

// volumeFor is the PersistentVolume a provisioner returns for the claim of
// options: its access and volume modes and requested size, the class's
// reclaim policy (Delete by default, as a StorageClass's), and source.
func volumeFor(options controller.ProvisionOptions, source corev1.PersistentVolumeSource) *corev1.PersistentVolume {
	claim := options.PVC
	reclaim := corev1.PersistentVolumeReclaimDelete
	if options.StorageClass.ReclaimPolicy != nil {
		reclaim = *options.StorageClass.ReclaimPolicy
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: options.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource:        source,
		},
	}
}
