//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// The real node's drivers.
const (
	// LocalProvisionerName provisions the real node's StorageClasses, a CSI
	// driver that clones and snapshots.
	LocalProvisionerName = "local-provisioner.embedops.dev"
	// LocalNoCloneProvisionerName provisions NoCloneStorageClass on the real
	// node: the same driver without the CLONE_VOLUME capability.
	LocalNoCloneProvisionerName = "local-provisioner-no-clone.embedops.dev"
)

// SizedStorageClass is the real node's class whose volumes hold no more than
// their claims request: each is a tmpfs mounted with size= the request, so
// a full volume fails a write with ENOSPC as a full disk does.
const SizedStorageClass = "sized"

// sizedParameter marks the StorageClass whose volumes are sized tmpfs mounts.
const sizedParameter = "embedops.dev/sized"

// localProvisioner provisions a CSI PersistentVolume of a directory per
// claim on the node (storage.go), once the scheduler picked the node
// (WaitForFirstConsumer), cloned or restored from the claim's data source.
// The kubelet mounts it through the harness's CSI node plugin
// (node_csi_linux.go) and applies fsGroup to it (REAL-NODE.md: the cache
// is written by uid 1000 through fsGroup; the kubelet applies fsGroup to a
// local volume, and to a CSI volume whose driver's fsGroupPolicy is File,
// not to a hostPath one). The snapshot-controller snapshots only CSI
// volumes. It runs in the test process with
// sig-storage-lib-external-provisioner, as the kwok cluster's does.
type localProvisioner struct {
	driver   *volumeDriver
	nodeName string
}

// Provision creates the claim's directory (a sized tmpfs for
// SizedStorageClass), fills it from the claim's data source, and returns
// its volume, bound to the node.
func (p *localProvisioner) Provision(ctx context.Context, options controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if options.SelectedNodeName != p.nodeName {
		return nil, controller.ProvisioningFinished, errors.New("the claim has no selected node of this cluster: its StorageClass must be WaitForFirstConsumer")
	}
	source, state, err := p.driver.prepareSource(ctx, options)
	if err != nil {
		return nil, state, err
	}
	path := filepath.Join(p.driver.volumes, options.PVName)
	// Root-owned and private, as a fresh disk: the kubelet hands it to the
	// pod's fsGroup.
	if err := os.MkdirAll(path, 0o700); err != nil {
		source.done()
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating the volume directory: %w", err)
	}
	if options.StorageClass.Parameters[sizedParameter] == "true" {
		size := options.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
		if err := unix.Mount("tmpfs", path, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size.Value())); err != nil {
			source.done()
			return nil, controller.ProvisioningFinished, fmt.Errorf("mounting the sized volume: %w", err)
		}
	}
	if err := source.fill(ctx, path); err != nil {
		return nil, controller.ProvisioningFinished, errors.Join(err, removeVolume(path))
	}
	volume := volumeFor(options, volumeSource(options, path))
	volume.Spec.NodeAffinity = nodeAffinity(p.nodeName)
	return volume, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory, ignoring volumes outside the
// driver's directory.
func (p *localProvisioner) Delete(_ context.Context, volume *corev1.PersistentVolume) error {
	path, err := p.driver.volumePath(volume)
	if err != nil {
		return err
	}
	return removeVolume(path)
}

// removeVolume unmounts a sized volume and removes the volume's directory.
func removeVolume(path string) error {
	if err := unmountSized(path); err != nil {
		return err
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("removing the volume directory: %w", err)
	}
	return nil
}

// unmountSized unmounts a sized volume's tmpfs; a plain directory is left
// as it is.
func unmountSized(path string) error {
	if err := unix.Unmount(path, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting the sized volume %s: %w", path, err)
	}
	return nil
}

// nodeAffinity pins a local volume to the node (required for `local`).
func nodeAffinity(nodeName string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName},
		}},
	}}}}
}

// nodeStorageClasses are the classes the examples name, DefaultStorageClass
// the default, SizedStorageClass, and NoCloneStorageClass (of
// LocalNoCloneProvisionerName), all on the node and WaitForFirstConsumer.
func nodeStorageClasses() []*storagev1.StorageClass {
	var classes []*storagev1.StorageClass
	for _, name := range []string{DefaultStorageClass, "fast", SizedStorageClass, NoCloneStorageClass} {
		class := &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: name},
			Provisioner:       LocalProvisionerName,
			ReclaimPolicy:     new(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: new(storagev1.VolumeBindingWaitForFirstConsumer),
		}
		if name == NoCloneStorageClass {
			class.Provisioner = LocalNoCloneProvisionerName
		}
		if name == SizedStorageClass {
			class.Parameters = map[string]string{sizedParameter: "true"}
		}
		if name == DefaultStorageClass {
			class.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
		}
		classes = append(classes, class)
	}
	return classes
}
