//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// LocalProvisionerName provisions the real node's StorageClasses.
const LocalProvisionerName = "embedops.dev/local-provisioner"

// SizedStorageClass is the real node's class whose volumes hold no more than
// their claims request: each is a tmpfs mounted with size= the request, so
// a full volume fails a write with ENOSPC as a full disk does.
const SizedStorageClass = "sized"

// sizedParameter marks the StorageClass whose volumes are sized tmpfs mounts.
const sizedParameter = "embedops.dev/sized"

// localProvisioner provisions a `local` PersistentVolume in a directory
// per claim on the node, once the scheduler picked the node
// (WaitForFirstConsumer). REAL-NODE.md: the kubelet applies fsGroup to a
// local volume, not to a hostPath one, and the cache is written by uid
// 1000 through fsGroup. It runs in the test process with
// sig-storage-lib-external-provisioner, as the kwok cluster's does.
type localProvisioner struct {
	dir      string
	nodeName string
}

// Provision creates the claim's directory and its volume, bound to the
// node.
func (p *localProvisioner) Provision(_ context.Context, options controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if options.SelectedNodeName != p.nodeName {
		return nil, controller.ProvisioningFinished, errors.New("the claim has no selected node of this cluster: its StorageClass must be WaitForFirstConsumer")
	}
	path := filepath.Join(p.dir, options.PVName)
	// Root-owned and private, as a fresh disk: the kubelet hands it to the
	// pod's fsGroup.
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating the volume directory: %w", err)
	}
	if options.StorageClass.Parameters[sizedParameter] == "true" {
		size := options.PVC.Spec.Resources.Requests[corev1.ResourceStorage]
		if err := unix.Mount("tmpfs", path, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size.Value())); err != nil {
			return nil, controller.ProvisioningFinished, fmt.Errorf("mounting the sized volume: %w", err)
		}
	}
	volume := volumeFor(options, corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}})
	volume.Spec.NodeAffinity = nodeAffinity(p.nodeName)
	return volume, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory, ignoring volumes outside dir.
func (p *localProvisioner) Delete(_ context.Context, volume *corev1.PersistentVolume) error {
	source := volume.Spec.Local
	if source == nil || !strings.HasPrefix(source.Path, p.dir+string(filepath.Separator)) {
		return &controller.IgnoredError{Reason: "the volume is not under the provisioner's directory"}
	}
	if err := unmountSized(source.Path); err != nil {
		return err
	}
	if err := os.RemoveAll(source.Path); err != nil {
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
// the default, both local and WaitForFirstConsumer.
func nodeStorageClasses() []*storagev1.StorageClass {
	var classes []*storagev1.StorageClass
	for _, name := range []string{DefaultStorageClass, "fast", SizedStorageClass} {
		class := &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: name},
			Provisioner:       LocalProvisionerName,
			ReclaimPolicy:     new(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: new(storagev1.VolumeBindingWaitForFirstConsumer),
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
