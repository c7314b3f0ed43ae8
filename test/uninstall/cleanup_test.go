package uninstall

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/cleanup"
	"github.com/embedops/embedops/internal/cli"
	"github.com/embedops/embedops/internal/controller/watch"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

var cluster *harness.Cluster

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithCluster(m, &cluster, harness.ClusterOptions{}))
}

// installCRDs installs embedops' CRDs once: no controller runs here, as
// after an uninstall.
var installCRDs = sync.OnceValue(func() error { return operator.InstallCRDs(cluster.Config) })

// leftBehind builds what a controller that is gone leaves: a server and a
// Shared binding with finalizers, and the binding's claim.
func leftBehind(t *testing.T, g *WithT, namespace string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	c := cluster.Client
	server := &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Name: "bge", Namespace: namespace, Finalizers: []string{embedopsv1.ServerFinalizer}},
		Spec:       embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"}, Cache: embedopsv1.CacheSpec{Mode: embedopsv1.CacheModeShared}},
	}
	g.Expect(c.Create(t.Context(), server)).To(Succeed())
	d, err := decision.For(server)
	g.Expect(err).NotTo(HaveOccurred())
	binding := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: decision.BindingName(d), Namespace: namespace, Finalizers: []string{embedopsv1.CacheProtectionFinalizer}},
		Spec: embedopsv1.ModelCacheBindingSpec{
			Identity: d.Identity, Decision: d.Decision,
			Source:    embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: metav1.Now()},
			Resources: embedopsv1.CacheResources{PersistentVolumeClaimNames: []string{"shared-cache"}},
		},
	}
	g.Expect(c.Create(t.Context(), binding)).To(Succeed())
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-cache", Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	g.Expect(controllerutil.SetControllerReference(binding, claim, cluster.Scheme)).To(Succeed())
	g.Expect(c.Create(t.Context(), claim)).To(Succeed())
	return binding
}

// holdLease makes the leader lease name look held right now.
func holdLease(t *testing.T, g *WithT, namespace, name string) {
	t.Helper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("controller-0"), LeaseDurationSeconds: ptr.To(int32(3600)),
			RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}
	g.Expect(cluster.Client.Create(t.Context(), lease)).To(Succeed())
}

func runCleanup(args ...string) (string, error) {
	var out bytes.Buffer
	root := cli.NewRootCommand()
	root.SetArgs(append([]string{"cleanup", "--kubeconfig", cluster.Kubeconfig}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

func TestCleanupLeavesNoBindingAndNoStuckNamespace(t *testing.T) {
	g := NewWithT(t)
	g.Expect(installCRDs()).To(Succeed())
	namespace := cluster.Namespace(t)
	leaseNamespace := cluster.Namespace(t)
	leftBehind(t, g, namespace)
	holdLease(t, g, leaseNamespace, watch.LeaderElectionID)

	out, err := runCleanup("-n", namespace, "--controller-namespace", leaseNamespace)
	g.Expect(err).To(MatchError(cleanup.ErrControllerRunning), out)
	g.Expect(bindings(t, g, namespace)).To(HaveLen(1), "a refused cleanup changes nothing")

	// A shard's controller (README "Sharding") holds a lease of its own.
	shardLeases := cluster.Namespace(t)
	holdLease(t, g, shardLeases, watch.ShardLeaderElectionID(runtimectrl.WatchOptions{LabelSelector: "sharding.fluxcd.io/key=shard1"}))
	out, err = runCleanup("-n", namespace, "--controller-namespace", shardLeases)
	g.Expect(err).To(MatchError(cleanup.ErrControllerRunning), out)
	g.Expect(bindings(t, g, namespace)).To(HaveLen(1), "a refused cleanup changes nothing")

	out, err = runCleanup("-n", namespace, "--controller-namespace", leaseNamespace, "--force")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("deleted"))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("persistentvolumeclaim/%s/shared-cache kept", namespace)))
	g.Eventually(func() []embedopsv1.ModelCacheBinding { return bindings(t, g, namespace) }).
		WithTimeout(time.Minute).Should(BeEmpty())
	claim := &corev1.PersistentVolumeClaim{}
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "shared-cache"}, claim)).To(Succeed())
		g.Expect(claim.OwnerReferences).To(BeEmpty(), "the claim is orphaned by the garbage collector, not deleted")
	}).WithTimeout(time.Minute).Should(Succeed())

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	g.Expect(cluster.Client.Delete(t.Context(), ns)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(ns), ns))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(BeTrue(), "the namespace is stuck: %v", ns.Status.Conditions)
}

func bindings(t *testing.T, g *WithT, namespace string) []embedopsv1.ModelCacheBinding {
	t.Helper()
	var list embedopsv1.ModelCacheBindingList
	g.Expect(cluster.Client.List(t.Context(), &list, client.InNamespace(namespace))).To(Succeed())
	return list.Items
}
