package e2e

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// TestANewServersBindingIsReferencedOnceItsClaimIsBound watches the binding
// of a new server from its creation until the server is Ready: its phase,
// the server's reference and its Ready condition are written once, in one
// status write, Ready=True (the server waits for its claim to bind before
// it writes its first reference). The populate Job's writes (ModelReady,
// status.realized) come and go beside them.
func TestANewServersBindingIsReferencedOnceItsClaimIsBound(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := harness.Namespace(t, cluster.Client)
	watching, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	watcher, err := watching.Watch(t.Context(), &embedopsv1.ModelCacheBindingList{}, client.InNamespace(namespace))
	g.Expect(err).NotTo(HaveOccurred())
	defer watcher.Stop()
	server := fixtures.EmbeddingServer(namespace, "once")
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	ready := expectReady(t, client.ObjectKeyFromObject(server), metav1.ConditionTrue, embedopsv1.AvailableReason)

	seen := bindingVersionsUntil(t, g, watcher, client.ObjectKey{Namespace: namespace, Name: ready.Status.CacheBinding})
	changes := lifecycleChanges(seen)
	g.Expect(changes).To(HaveLen(1), "one write of phase, references and Ready: %v", changes)
	written := changes[0]
	g.Expect(written.Status.Phase).To(Equal(embedopsv1.BindingActive))
	g.Expect(decision.HasReference(written, server.UID)).To(BeTrue())
	g.Expect(conditions.IsTrue(written, embedopsv1.ReadyCondition)).To(BeTrue(), "the first status is the Ready one: %s", conditions.GetMessage(written, embedopsv1.ReadyCondition))
	claim := &corev1.PersistentVolumeClaim{}
	g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: written.Spec.Resources.PersistentVolumeClaimNames[0]}, claim)).To(Succeed())
	g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
}

// lifecycleChanges returns the versions of a binding whose phase,
// references or Ready condition differ from the version before (the first
// version, its creation, has none of them).
func lifecycleChanges(versions []*embedopsv1.ModelCacheBinding) []*embedopsv1.ModelCacheBinding {
	var changes []*embedopsv1.ModelCacheBinding
	for i := 1; i < len(versions); i++ {
		before, after := versions[i-1], versions[i]
		if before.Status.Phase != after.Status.Phase ||
			!equality.Semantic.DeepEqual(before.Status.RequestReferences, after.Status.RequestReferences) ||
			!equality.Semantic.DeepEqual(conditions.Get(before, embedopsv1.ReadyCondition), conditions.Get(after, embedopsv1.ReadyCondition)) {
			changes = append(changes, after)
		}
	}
	return changes
}

// bindingVersionsUntil collects the versions of the binding the watch
// delivered, up to the one the API server holds now.
func bindingVersionsUntil(t *testing.T, g *WithT, watcher watch.Interface, key client.ObjectKey) []*embedopsv1.ModelCacheBinding {
	t.Helper()
	current := &embedopsv1.ModelCacheBinding{}
	g.Expect(cluster.Client.Get(t.Context(), key, current)).To(Succeed())
	name := key.Name
	var seen []*embedopsv1.ModelCacheBinding
	for {
		select {
		case event, ok := <-watcher.ResultChan():
			g.Expect(ok).To(BeTrue(), "the watch ended")
			g.Expect(event.Type).NotTo(Equal(watch.Error), "%v", event.Object)
			binding, isBinding := event.Object.(*embedopsv1.ModelCacheBinding)
			if !isBinding || binding.Name != name {
				continue
			}
			seen = append(seen, binding)
			if binding.ResourceVersion == current.ResourceVersion {
				return seen
			}
		case <-time.After(settle):
			t.Fatalf("the watch did not deliver resourceVersion %s of binding %s", current.ResourceVersion, name)
		}
	}
}
