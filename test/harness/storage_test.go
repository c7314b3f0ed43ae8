package harness

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestClonesAndSnapshots starts a local cluster and checks that its storage
// honours a claim's data source as a CSI driver behind external-provisioner
// does, and that the real snapshot-controller and the harness's
// csi-snapshotter stand-in snapshot, restore and delete.
func TestClonesAndSnapshots(t *testing.T) {
	cluster, err := StartCluster(t.Context(), ClusterOptions{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cluster.ComponentLogs(40))
		}
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	storage := &clusterStorage{c: cluster.Client, namespace: cluster.Namespace(t)}

	t.Run("a clone has the source's files, modes and symlinks", func(t *testing.T) {
		t.Parallel()
		g := newG(t)
		source := storage.bound(t, g, storage.claim("source", DefaultStorageClass, "1Gi", nil))
		want := populate(t, storage.dir(t, g, source))
		clone := storage.bound(t, g, storage.claim("clone", DefaultStorageClass, "2Gi", claimSource(source.Name)))
		g.Expect(readTree(t, storage.dir(t, g, clone))).To(Equal(want))
		g.Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(source), source)).To(Succeed())
			g.Expect(source.Finalizers).NotTo(ContainElement(pvcCloneFinalizer))
		}).Should(Succeed(), "the cloning protection is released once the clone is filled")
	})
	t.Run("a clone may be of another class of the same driver", func(t *testing.T) {
		t.Parallel()
		g := newG(t)
		class := defaultStorageClass()
		class.Name, class.Annotations = "other-"+storage.namespace, nil
		g.Expect(cluster.Client.Create(t.Context(), class)).To(Succeed())
		t.Cleanup(func() { _ = cluster.Client.Delete(t.Context(), class) })
		source := storage.bound(t, g, storage.claim("source", DefaultStorageClass, "1Gi", nil))
		want := populate(t, storage.dir(t, g, source))
		clone := storage.bound(t, g, storage.claim("clone", class.Name, "1Gi", claimSource(source.Name)))
		g.Expect(readTree(t, storage.dir(t, g, clone))).To(Equal(want))
	})
	t.Run("refused clones stay Pending with external-provisioner's event", func(t *testing.T) {
		t.Parallel()
		g := newG(t)
		source := storage.bound(t, g, storage.claim("source", DefaultStorageClass, "2Gi", nil))
		populate(t, storage.dir(t, g, source))
		otherDriver := storage.bound(t, g, storage.claim("other-driver", NoCloneStorageClass, "1Gi", nil))
		// Of a class no one serves: Pending for good.
		unbound := storage.claim("unbound", "absent-"+storage.namespace, "1Gi", nil)
		storage.create(t, g, unbound)
		for _, refusal := range []struct {
			name, class, size, source, event string
		}{
			{"smaller", DefaultStorageClass, "1Gi", source.Name,
				"error getting handle for DataSource Type PersistentVolumeClaim by Name " + source.Name +
					": error, new PVC request must be greater than or equal in size to the specified PVC data source, requested 1073741824 but source is 2147483648"},
			{"no-clone-driver", NoCloneStorageClass, "2Gi", source.Name,
				"CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported"},
			{"other-driver", DefaultStorageClass, "1Gi", otherDriver.Name,
				"error getting handle for DataSource Type PersistentVolumeClaim by Name " + otherDriver.Name + ": claim in dataSource not bound or invalid"},
			{"unbound-source", DefaultStorageClass, "1Gi", unbound.Name,
				"error getting handle for DataSource Type PersistentVolumeClaim by Name " + unbound.Name + ": the PVC DataSource " + unbound.Name + " must have a status of Bound."},
		} {
			claim := storage.claim("refused-"+refusal.name, refusal.class, refusal.size, claimSource(refusal.source))
			storage.refused(t, g, claim, refusal.event)
		}
	})
	t.Run("a snapshot becomes ready, restores and is deleted with its directory", func(t *testing.T) {
		t.Parallel()
		g := newG(t)
		source := storage.bound(t, g, storage.claim("source", DefaultStorageClass, "1Gi", nil))
		want := populate(t, storage.dir(t, g, source))
		// No class: the snapshot-controller picks the default class of the
		// volume's driver, DefaultSnapshotClass.
		snapshot := storage.snapshot(t, g, "snap", source.Name, "")
		content := storage.ready(t, g, snapshot)
		g.Expect(content.Spec.VolumeSnapshotClassName).To(HaveValue(Equal(DefaultSnapshotClass)))
		g.Expect(content.Spec.Driver).To(Equal(ProvisionerName))
		g.Expect(snapshot.Status.RestoreSize).To(HaveValue(Equal(resource.MustParse("1Gi"))))
		g.Expect(snapshot.Status.CreationTime).NotTo(BeNil())
		handle := *content.Status.SnapshotHandle
		g.Expect(readTree(t, handle)).To(Equal(want), "the snapshot's directory holds the volume's files")

		restored := storage.bound(t, g, storage.claim("restored", DefaultStorageClass, "1Gi", snapshotSource(snapshot.Name)))
		g.Expect(readTree(t, storage.dir(t, g, restored))).To(Equal(want))
		smaller := storage.refused(t, g, storage.claim("restore-smaller", DefaultStorageClass, "512Mi", snapshotSource(snapshot.Name)),
			"error getting handle for DataSource Type VolumeSnapshot by Name snap: requested volume size 536870912 is less than the size 1073741824 for the source snapshot snap")
		otherDriver := storage.refused(t, g, storage.claim("restore-other-driver", NoCloneStorageClass, "1Gi", snapshotSource(snapshot.Name)),
			"error getting handle for DataSource Type VolumeSnapshot by Name snap: snapshotcontent "+content.Name+" for snapshot snap is not handled by CSI driver of StorageClass no-clone")

		// The snapshot-controller keeps a snapshot that a Pending claim is
		// restored from (isVolumeBeingCreatedFromSnapshot).
		g.Expect(cluster.Client.Delete(t.Context(), smaller)).To(Succeed())
		g.Expect(cluster.Client.Delete(t.Context(), otherDriver)).To(Succeed())
		g.Expect(cluster.Client.Delete(t.Context(), snapshot)).To(Succeed())
		storage.gone(t, g, content)
		storage.gone(t, g, snapshot)
		g.Expect(handle).NotTo(BeAnExistingFile(), "deleting the snapshot removes its directory")
	})
	t.Run("a driver without clone support snapshots and restores", func(t *testing.T) {
		t.Parallel()
		g := newG(t)
		source := storage.bound(t, g, storage.claim("source", NoCloneStorageClass, "1Gi", nil))
		want := populate(t, storage.dir(t, g, source))
		snapshot := storage.snapshot(t, g, "no-clone", source.Name, "")
		content := storage.ready(t, g, snapshot)
		g.Expect(content.Spec.VolumeSnapshotClassName).To(HaveValue(Equal(NoCloneSnapshotClass)))
		restored := storage.bound(t, g, storage.claim("restored", NoCloneStorageClass, "1Gi", snapshotSource(snapshot.Name)))
		g.Expect(readTree(t, storage.dir(t, g, restored))).To(Equal(want))
	})
	t.Run("a snapshot of the never-ready class never becomes ready", func(t *testing.T) {
		t.Parallel()
		g := newG(t)
		source := storage.bound(t, g, storage.claim("source", DefaultStorageClass, "1Gi", nil))
		snapshot := storage.snapshot(t, g, "never", source.Name, NeverReadySnapshotClass)
		content := &snapshotv1.VolumeSnapshotContent{}
		g.Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(snapshot), snapshot)).To(Succeed())
			g.Expect(snapshot.Status).NotTo(BeNil())
			g.Expect(snapshot.Status.BoundVolumeSnapshotContentName).NotTo(BeNil())
			g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Name: *snapshot.Status.BoundVolumeSnapshotContentName}, content)).To(Succeed())
			g.Expect(content.Status).NotTo(BeNil())
			g.Expect(content.Status.SnapshotHandle).NotTo(BeNil(), "the driver answered")
			g.Expect(content.Status.ReadyToUse).To(HaveValue(BeFalse()))
			g.Expect(content.Annotations).NotTo(HaveKey(annBeingCreated), "the driver's answer is final")
			g.Expect(snapshot.Status.ReadyToUse).To(HaveValue(BeFalse()))
		}).Should(Succeed())
		restored := storage.refused(t, g, storage.claim("restored", DefaultStorageClass, "1Gi", snapshotSource(snapshot.Name)),
			"error getting handle for DataSource Type VolumeSnapshot by Name never: snapshot never is not Ready")
		g.Expect(cluster.Client.Delete(t.Context(), restored)).To(Succeed())
		g.Expect(cluster.Client.Delete(t.Context(), snapshot)).To(Succeed())
		storage.gone(t, g, content)
		storage.gone(t, g, snapshot)
	})
}

// clusterStorage creates claims and snapshots in a namespace of a cluster,
// the kwok cluster's or the real node's.
type clusterStorage struct {
	c         client.Client
	namespace string
	// pod, when set, starts a pod mounting the claim, which a
	// WaitForFirstConsumer class needs before it provisions.
	pod func(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim)
}

// claim creates a claim of class and size named name-<random>, from source
// when not nil.
func (s *clusterStorage) claim(name, class, size string, source *corev1.TypedObjectReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: s.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			DataSourceRef:    source,
		},
	}
}

// claimSource names a claim as a data source.
func claimSource(name string) *corev1.TypedObjectReference {
	return &corev1.TypedObjectReference{Kind: pvcKind, Name: name}
}

// snapshotSource names a VolumeSnapshot as a data source.
func snapshotSource(name string) *corev1.TypedObjectReference {
	return &corev1.TypedObjectReference{APIGroup: new(snapshotv1.GroupName), Kind: snapshotKind, Name: name}
}

// create creates the claim and, when the storage needs one, its pod.
func (s *clusterStorage) create(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim) {
	t.Helper()
	g.Expect(s.c.Create(t.Context(), claim)).To(Succeed())
	if s.pod != nil {
		s.pod(t, g, claim)
	}
}

// bound creates the claim and waits until it is bound.
func (s *clusterStorage) bound(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	t.Helper()
	s.create(t, g, claim)
	g.Eventually(func(g Gomega) {
		g.Expect(s.c.Get(t.Context(), client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
	}).Should(Succeed(), "claim %s binds", claim.Name)
	return claim
}

// refused creates the claim, waits for the provisioner's ProvisioningFailed
// event starting with message, and checks that the claim is still Pending,
// with no volume.
func (s *clusterStorage) refused(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim, message string) *corev1.PersistentVolumeClaim {
	t.Helper()
	s.create(t, g, claim)
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(s.c.List(t.Context(), events, client.InNamespace(s.namespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("InvolvedObject.UID", claim.UID),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Reason", "ProvisioningFailed"),
			HaveField("Message", HavePrefix(message)))))
	}).Should(Succeed(), "claim %s is refused", claim.Name)
	g.Expect(s.c.Get(t.Context(), client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimPending))
	g.Expect(claim.Spec.VolumeName).To(BeEmpty())
	return claim
}

// dir is the directory of the bound claim's volume.
func (s *clusterStorage) dir(t *testing.T, g *WithT, claim *corev1.PersistentVolumeClaim) string {
	t.Helper()
	volume := &corev1.PersistentVolume{}
	g.Expect(s.c.Get(t.Context(), client.ObjectKey{Name: claim.Spec.VolumeName}, volume)).To(Succeed())
	dir, err := VolumeDir(volume)
	g.Expect(err).NotTo(HaveOccurred())
	return dir
}

// snapshot creates a VolumeSnapshot of the claim, of class when not empty.
func (s *clusterStorage) snapshot(t *testing.T, g *WithT, name, claim, class string) *snapshotv1.VolumeSnapshot {
	t.Helper()
	snapshot := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace},
		Spec:       snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}},
	}
	if class != "" {
		snapshot.Spec.VolumeSnapshotClassName = &class
	}
	g.Expect(s.c.Create(t.Context(), snapshot)).To(Succeed())
	return snapshot
}

// ready waits until the snapshot is readyToUse and returns its content.
func (s *clusterStorage) ready(t *testing.T, g *WithT, snapshot *snapshotv1.VolumeSnapshot) *snapshotv1.VolumeSnapshotContent {
	t.Helper()
	content := &snapshotv1.VolumeSnapshotContent{}
	g.Eventually(func(g Gomega) {
		g.Expect(s.c.Get(t.Context(), client.ObjectKeyFromObject(snapshot), snapshot)).To(Succeed())
		g.Expect(snapshot.Status).NotTo(BeNil())
		g.Expect(snapshot.Status.Error).To(BeNil())
		g.Expect(snapshot.Status.ReadyToUse).To(HaveValue(BeTrue()))
		g.Expect(s.c.Get(t.Context(), client.ObjectKey{Name: *snapshot.Status.BoundVolumeSnapshotContentName}, content)).To(Succeed())
		g.Expect(content.Status).NotTo(BeNil())
		g.Expect(content.Status.SnapshotHandle).NotTo(BeNil())
	}).Should(Succeed(), "snapshot %s becomes ready", snapshot.Name)
	return content
}

// gone waits until obj is deleted.
func (s *clusterStorage) gone(t *testing.T, g *WithT, obj client.Object) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		err := s.c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s is deleted, got %v", obj, obj.GetName(), err)
	}).Should(Succeed())
}

// treeEntry is what a copy must keep of a file: its mode, owner, content or
// link target.
type treeEntry struct {
	Mode     fs.FileMode
	UID, GID uint32
	Content  string
}

// populate writes a model cache's shape into dir, as the HF cache lays it
// out: blobs, a revision's snapshot of relative symlinks to them, a ref;
// plus a private file and directory, owned by another user when the test
// runs as root. It returns the tree as readTree reads it.
func populate(t *testing.T, dir string) map[string]treeEntry {
	t.Helper()
	model := filepath.Join(dir, "models--org--model")
	files := []struct {
		path, content string
		mode          fs.FileMode
	}{
		{"blobs/0a1b2c", "weights", 0o644},
		{"blobs/3d4e5f", `{"hidden_size": 384}`, 0o644},
		{"refs/main", "abc123", 0o644},
		{"private/token", "secret", 0o600},
	}
	for _, f := range files {
		path := filepath.Join(model, f.path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(f.content), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(model, "private"), 0o750); err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(model, "snapshots", "abc123")
	if err := os.MkdirAll(snapshot, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, blob := range map[string]string{"model.safetensors": "0a1b2c", "config.json": "3d4e5f"} {
		if err := os.Symlink(filepath.Join("..", "..", "blobs", blob), filepath.Join(snapshot, name)); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		for _, path := range []string{"private", "private/token"} {
			if err := os.Lchown(filepath.Join(model, path), 1000, 2000); err != nil {
				t.Fatal(err)
			}
		}
	}
	return readTree(t, dir)
}

// readTree reads every entry under dir (not dir itself) by its path
// relative to dir.
func readTree(t *testing.T, dir string) map[string]treeEntry {
	t.Helper()
	tree := map[string]treeEntry{}
	err := filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := entry.Info()
		if err != nil {
			return err
		}
		stat := info.Sys().(*syscall.Stat_t)
		e := treeEntry{Mode: info.Mode(), UID: stat.Uid, GID: stat.Gid}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			e.Content, err = os.Readlink(path)
		case info.Mode().IsRegular():
			var data []byte
			data, err = os.ReadFile(path)
			e.Content = string(data)
		}
		rel, _ := filepath.Rel(dir, path)
		tree[rel] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}
