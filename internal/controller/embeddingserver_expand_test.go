package controller

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

func TestSizeIncreaseExpandsTheClaimsInPlace(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	class := namespace + "-expandable"
	createExpandableStorageClass(t, g, class)
	playStatefulSetController(t, namespace)
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithReplicas(2),
		fixtures.WithStorageClass(class), fixtures.WithCacheSize("10Gi"), fixtures.WithRetainFor(time.Hour)))
	first := waitForBinding(t, g, key, "")
	sts := waitForStatefulSet(t, g, key)
	claims := createBoundTemplateClaims(t, g, sts)
	g.Expect(claims).To(ConsistOf(first.Spec.Resources.PersistentVolumeClaimNames))

	updateServer(t, g, key, fixtures.WithCacheSize("20Gi"))
	second := waitForBinding(t, g, key, first.Name)
	g.Expect(second.Spec.Supersedes).To(Equal(first.Name), "the larger size takes over the claims")
	g.Expect(decision.StorageName(second)).To(Equal(decision.StorageName(first)))
	g.Expect(second.Spec.Decision.Size.String()).To(Equal("20Gi"))
	g.Eventually(func(g Gomega) {
		for _, name := range claims {
			claim := &corev1.PersistentVolumeClaim{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, claim)).To(Succeed())
			g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("20Gi"), "claim %s is expanded in place", name)
		}
		g.Expect(getBinding(t, g, namespace, first.Name).Status.Phase).To(Equal(embedopsv1.BindingReleased), "superseded, deleting nothing")
	}).Should(Succeed())
	g.Expect(eventsAbout(t, g, namespace, second.Name, corev1.EventTypeNormal, embedopsv1.ClaimExpandingReason)).To(HaveLen(len(claims)))
	g.Consistently(func(g Gomega) {
		sets := statefulSetsOf(t, g, namespace)
		g.Expect(sets).To(HaveLen(1), "no new StatefulSet, no new volume")
		g.Expect(sets[0].UID).To(Equal(sts.UID))
		g.Expect(sets[0].Generation).To(Equal(sts.Generation), "the pods are not restarted")
	}).Should(Succeed())
}

// createExpandableStorageClass makes a StorageClass that allows volume
// expansion, deleted when the test ends.
func createExpandableStorageClass(t *testing.T, g *WithT, name string) {
	t.Helper()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/expandable", AllowVolumeExpansion: new(true)}
	g.Expect(env.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
}

// createBoundTemplateClaims plays the StatefulSet and PersistentVolume
// controllers, which envtest does not run: the claims of each replica from
// the StatefulSet's claim templates (<template>-<statefulset>-<ordinal>,
// with the template's labels), Bound with the requested capacity. It
// returns their names.
func createBoundTemplateClaims(t *testing.T, g *WithT, sts *appsv1.StatefulSet) []string {
	t.Helper()
	var names []string
	for _, template := range sts.Spec.VolumeClaimTemplates {
		for i := range replicasOf(sts) {
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: fmt.Sprintf("%s-%s-%d", template.Name, sts.Name, i), Labels: maps.Clone(template.Labels)},
				Spec:       *template.Spec.DeepCopy(),
			}
			g.Expect(env.Client.Create(t.Context(), claim)).To(Succeed())
			claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(template.Spec.Resources.Requests.Storage().String())}}
			g.Expect(env.Client.Status().Update(t.Context(), claim)).To(Succeed())
			names = append(names, claim.Name)
		}
	}
	return names
}
