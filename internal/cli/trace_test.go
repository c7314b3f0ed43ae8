package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// tracedCommit is the revision the traced server declares.
const tracedCommit = "0123456789abcdef0123456789abcdef01234567"

func TestTraceFollowsAServerToItsBindingsClaimsAndCommit(t *testing.T) {
	g := NewWithT(t)
	env, kubeconfig := reconciledCluster(t)
	c := env.Client
	namespace := harness.Namespace(t, c)
	server := fixtures.EmbeddingServer(namespace, "tei", fixtures.WithAnnotations(map[string]string{
		embedopsv1.SourceRevisionAnnotation:   "main@sha1:" + tracedCommit,
		embedopsv1.SourceRepositoryAnnotation: "https://git.example.com/platform/models.git",
		embedopsv1.SourcePathAnnotation:       "apps/tei",
	}))
	g.Expect(c.Create(t.Context(), server)).To(Succeed())
	g.Expect(c.Create(t.Context(), fixtures.EmbeddingServer(namespace, "other"))).To(Succeed())
	old := boundBinding(t, g, c, server, "")
	boundClaim(t, g, c, namespace, old.Spec.Resources.PersistentVolumeClaimNames[0], "pv-old")

	// A new decision leaves the old binding as a record of the server.
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(server), server)).To(Succeed())
	server.Spec.Cache.Size = new(resource.MustParse("20Gi"))
	g.Expect(c.Update(t.Context(), server)).To(Succeed())
	current := boundBinding(t, g, c, server, old.Name)
	finishRollout(t, g, c, server, old.Name)

	out, _, err := runCLI("", "trace", namespace+"/tei", "--kubeconfig", kubeconfig, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var trace serverTrace
	g.Expect(json.Unmarshal([]byte(out), &trace)).To(Succeed())
	g.Expect(trace.Server).To(Equal(namespace + "/tei"))
	g.Expect(trace.Model).To(Equal(fixtures.Model + "@main"))
	g.Expect(trace.Bindings).To(ConsistOf(
		And(HaveField("Name", old.Name), HaveField("InUse", false), HaveField("Size", "10Gi"), HaveField("Digest", old.Spec.Decision.Digest),
			HaveField("Claims", ContainElement(claimTrace{Name: old.Spec.Resources.PersistentVolumeClaimNames[0], Phase: "Bound", Volume: "pv-old"}))),
		And(HaveField("Name", current.Name), HaveField("InUse", true), HaveField("Size", "20Gi"),
			HaveField("Claims", HaveEach(HaveField("Phase", "Absent")))),
	), "the other server's binding is not traced")
	for _, b := range trace.Bindings {
		g.Expect(b.Source.Method).To(Equal(embedopsv1.SourceDeclared))
		g.Expect(b.Source.Commit).To(Equal(tracedCommit))
		g.Expect(b.Source.Path).To(Equal("apps/tei"))
	}

	table, _, err := runCLI("", "trace", "tei", "-n", namespace, "--kubeconfig", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(table).To(HavePrefix("EmbeddingServer " + namespace + "/tei"))
	g.Expect(table).To(ContainSubstring("ModelCacheBinding " + old.Name + "  Active, record  PerReplica 10Gi (default class)"))
	g.Expect(table).To(ContainSubstring("ModelCacheBinding " + current.Name + "  Active, in use  PerReplica 20Gi (default class)"))
	g.Expect(table).To(ContainSubstring("claim " + old.Spec.Resources.PersistentVolumeClaimNames[0] + "  Bound  volume pv-old"))
	g.Expect(strings.Count(table, "└─ commit "+tracedCommit+" in https://git.example.com/platform/models.git at apps/tei")).To(Equal(2))
}

func TestTraceReportsWhatItCannotFollow(t *testing.T) {
	g := NewWithT(t)
	env, kubeconfig := reconciledCluster(t)
	namespace := harness.Namespace(t, env.Client)
	_, _, err := runCLI("", "trace", namespace+"/absent", "--kubeconfig", kubeconfig)
	g.Expect(err).To(MatchError(ContainSubstring("reading EmbeddingServer " + namespace + "/absent")))
	g.Expect(IsUsageError(err)).To(BeFalse())

	for _, args := range [][]string{{"trace", "tei", "-o", "xml"}, {"trace", "tei", "-A"}} {
		_, _, err = runCLI("", append(args, "--kubeconfig", kubeconfig)...)
		g.Expect(IsUsageError(err)).To(BeTrue(), "%v: %v", args, err)
	}
}

// boundBinding waits until the server's status names a binding other than
// previous that references it, and returns that binding.
func boundBinding(t *testing.T, g *WithT, c client.Client, server *embedopsv1.EmbeddingServer, previous string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := &embedopsv1.ModelCacheBinding{}
	g.Eventually(func(g Gomega) {
		es := &embedopsv1.EmbeddingServer{}
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(server), es)).To(Succeed())
		g.Expect(es.Status.CacheBinding).NotTo(BeElementOf("", previous))
		g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: es.Namespace, Name: es.Status.CacheBinding}, binding)).To(Succeed())
		g.Expect(binding.Status.RequestReferences).To(ContainElement(HaveField("UID", es.UID)))
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	return binding
}

// finishRollout plays the StatefulSet controller, which envtest does not
// run, until the server's pods moved to the new storage: every StatefulSet
// of the namespace reports its replicas ready, until the server no longer
// references the binding named old.
func finishRollout(t *testing.T, g *WithT, c client.Client, server *embedopsv1.EmbeddingServer, old string) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		var sets appsv1.StatefulSetList
		g.Expect(c.List(t.Context(), &sets, client.InNamespace(server.Namespace))).To(Succeed())
		for i := range sets.Items {
			sts := &sets.Items[i]
			replicas := *sts.Spec.Replicas
			sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: replicas, ReadyReplicas: replicas,
				AvailableReplicas: replicas, CurrentReplicas: replicas, UpdatedReplicas: replicas}
			_ = c.Status().Update(t.Context(), sts) // a conflict is retried by the next attempt
		}
		binding := &embedopsv1.ModelCacheBinding{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: server.Namespace, Name: old}, binding)).To(Succeed())
		g.Expect(binding.Status.RequestReferences).NotTo(ContainElement(HaveField("UID", server.UID)))
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// boundClaim creates a cache claim bound to volume, as the StatefulSet
// controller and a provisioner would leave it.
func boundClaim(t *testing.T, g *WithT, c client.Client, namespace, name, volume string) {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			VolumeName:  volume,
		},
	}
	g.Expect(c.Create(t.Context(), claim)).To(Succeed())
	claim.Status.Phase = corev1.ClaimBound
	g.Expect(c.Status().Update(t.Context(), claim)).To(Succeed())
}

func TestTraceShowsAnExistingClaimAsNotOwned(t *testing.T) {
	g := NewWithT(t)
	env, kubeconfig := reconciledCluster(t)
	c := env.Client
	namespace := harness.Namespace(t, c)
	boundClaim(t, g, c, namespace, "models", "pv-user")
	server := fixtures.EmbeddingServer(namespace, "byov", fixtures.WithExistingClaim("models"))
	g.Expect(c.Create(t.Context(), server)).To(Succeed())
	binding := boundBinding(t, g, c, server, "")

	out, _, err := runCLI("", "trace", namespace+"/byov", "--kubeconfig", kubeconfig, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var trace serverTrace
	g.Expect(json.Unmarshal([]byte(out), &trace)).To(Succeed())
	g.Expect(trace.Bindings).To(ConsistOf(And(HaveField("Name", binding.Name),
		HaveField("Claims", Equal([]claimTrace{{Name: "models", Phase: "Bound", Volume: "pv-user", Existing: true}})))))

	table, _, err := runCLI("", "trace", "byov", "-n", namespace, "--kubeconfig", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(table).To(ContainSubstring("ModelCacheBinding " + binding.Name + "  Active, in use  Shared 0 (existing claim)"))
	g.Expect(table).To(ContainSubstring("claim models  Bound  volume pv-user  (existingClaim: not owned, never deleted)"))
}
