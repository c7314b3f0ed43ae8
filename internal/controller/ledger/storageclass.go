package ledger

import (
	"context"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// DefaultStorageClassAnnotation marks the cluster's default StorageClass.
const DefaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// storageClassOf reads the named StorageClass, or the cluster default for
// "". It returns nil when there is none.
func storageClassOf(ctx context.Context, reader client.Reader, name string) (*storagev1.StorageClass, error) {
	if name != "" {
		class := &storagev1.StorageClass{}
		err := reader.Get(ctx, types.NamespacedName{Name: name}, class)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading StorageClass %s: %w", name, err)
		}
		return class, nil
	}
	var classes storagev1.StorageClassList
	if err := reader.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing StorageClasses: %w", err)
	}
	for i := range classes.Items {
		if classes.Items[i].Annotations[DefaultStorageClassAnnotation] == "true" {
			return &classes.Items[i], nil
		}
	}
	return nil, nil
}

// classExpands reports whether the binding's StorageClass (the default for
// "") allows volume expansion, read from the cache: the API server's
// PersistentVolumeClaimResize admission refuses a larger request otherwise
// (k8s plugin/pkg/admission/storage/persistentvolume/resize). A class whose
// provisioner is not the one the binding recorded (a default class changed
// since) is not the claims' class: it does not count.
func (r *reads) classExpands(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (bool, error) {
	class, err := storageClassOf(ctx, r.cache, binding.Spec.Decision.StorageClassName)
	if err != nil || class == nil {
		return false, err
	}
	if recorded := binding.Spec.Decision.Provisioner; recorded != "" && recorded != class.Provisioner {
		return false, nil
	}
	return class.AllowVolumeExpansion != nil && *class.AllowVolumeExpansion, nil
}
