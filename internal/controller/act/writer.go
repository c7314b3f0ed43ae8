package act

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Writer writes the server's children and what they depend on, under
// embedopsv1.FieldManager.
type Writer struct {
	client    client.Client
	resources *ssa.ResourceManager
}

// NewWriter writes through c; children go through fluxcd/pkg/ssa, which
// labels them with embedops.dev's owner labels.
func NewWriter(c client.Client) *Writer {
	return &Writer{
		client:    c,
		resources: ssa.NewResourceManager(c, nil, ssa.Owner{Field: embedopsv1.FieldManager, Group: embedopsv1.GroupVersion.Group}),
	}
}

// OwnerLabels are the labels ssa gives the children of the server name in
// namespace.
func (w *Writer) OwnerLabels(name, namespace string) map[string]string {
	return w.resources.GetOwnerLabels(name, namespace)
}

// Delete deletes obj in the background, only while it has uid. The API
// server's error is returned as it is, NotFound included.
func (w *Writer) Delete(ctx context.Context, obj client.Object, uid types.UID) error {
	background := metav1.DeletePropagationBackground
	return w.client.Delete(ctx, obj, &client.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &uid}})
}

// MergePatch sends patch, a JSON merge patch, to obj; a patch that names
// metadata.uid is refused for an object of another UID.
func (w *Writer) MergePatch(ctx context.Context, obj client.Object, patch []byte) error {
	return w.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// CreateJob creates a populate Job.
func (w *Writer) CreateJob(ctx context.Context, job *batchv1.Job) error {
	return w.client.Create(ctx, job, client.FieldOwner(embedopsv1.FieldManager))
}

// CreateClaim creates a claim a StatefulSet will adopt by its name.
func (w *Writer) CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	return w.client.Create(ctx, claim, client.FieldOwner(embedopsv1.FieldManager))
}

// CreateSnapshot creates a VolumeSnapshot of a claim.
func (w *Writer) CreateSnapshot(ctx context.Context, snapshot *snapshotv1.VolumeSnapshot) error {
	return w.client.Create(ctx, snapshot, client.FieldOwner(embedopsv1.FieldManager))
}

// DeleteClaimAsRead deletes a claim only while it has the UID and
// resourceVersion it was read at.
func (w *Writer) DeleteClaimAsRead(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	return w.client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
}

// DeleteJob deletes a Job and, in the background, its pods.
func (w *Writer) DeleteJob(ctx context.Context, job *batchv1.Job) error {
	background := metav1.DeletePropagationBackground
	return w.client.Delete(ctx, job, &client.DeleteOptions{PropagationPolicy: &background})
}

// CreateChild creates child, which the caller read as free a moment ago, by
// one forced server-side apply, and returns the API server's answer. ssa's
// ResourceManager would first GET it and dry-run its apply to detect
// drift; for an object that does not exist both are wasted: the apply
// creates it, and refuses an invalid object as the dry run would.
func (w *Writer) CreateChild(ctx context.Context, child *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	applied := child.DeepCopy()
	if err := w.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.ForceOwnership, client.FieldOwner(embedopsv1.FieldManager)); err != nil {
		return nil, fmt.Errorf("creating %s %s: %w", child.GetKind(), child.GetName(), err)
	}
	applied.SetGroupVersionKind(child.GroupVersionKind())
	return applied, nil
}

// ApplyChildren applies children with ssa's drift detection, in ssa's
// stages; force recreates those whose immutable fields change.
func (w *Writer) ApplyChildren(ctx context.Context, children []*unstructured.Unstructured, force bool) (*ssa.ChangeSet, error) {
	opts := ssa.DefaultApplyOptions()
	opts.Force = force
	return w.resources.ApplyAllStaged(ctx, children, opts)
}

// DryRunCreate asks the API server to create obj without storing it: it
// answers whether obj is valid as a new object.
func (w *Writer) DryRunCreate(ctx context.Context, obj client.Object) error {
	return w.client.Create(ctx, obj, client.DryRunAll, client.FieldOwner(embedopsv1.FieldManager))
}

// DryRunApply asks the API server to apply obj with force without storing
// it; obj becomes the object the apply would store.
func (w *Writer) DryRunApply(ctx context.Context, obj *unstructured.Unstructured) error {
	return w.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.ForceOwnership, client.FieldOwner(embedopsv1.FieldManager))
}
