package controller

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/endpoint"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// withEndpointCheck turns the check on, every dial reaching standIn.
func withEndpointCheck(standIn *teiStandIn) func(*ManagerOptions) {
	return func(opts *ManagerOptions) {
		opts.EmbeddingServer.EndpointCheck = true
		opts.EmbeddingServer.EndpointClient = endpoint.NewClient(endpoint.DialTo(standIn.server.Listener.Addr().String()))
		opts.EmbeddingServer.EndpointInterval = 200 * time.Millisecond
	}
}

// startedServer creates a server whose StatefulSet is ready, and waits
// until it is Available.
func startedServer(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer) *embedopsv1.EmbeddingServer {
	t.Helper()
	key := createServer(t, g, server)
	waitForStatefulSet(t, g, key)
	markStatefulSetReady(t, g, key)
	return waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
}

func TestServerEndpointCheckRecordsWhatTEIServes(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, withEndpointCheck(standIn))
	server := startedServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	key := client.ObjectKeyFromObject(server)

	server = waitForPhase(t, g, key, embedopsv1.PhaseReady)
	g.Expect(server.Status.EndpointCheck).To(Equal(embedopsv1.EndpointCheckEnabled))
	g.Expect(server.Status.Served).To(Equal(&embedopsv1.ServedModel{
		ModelID: "BAAI/bge-small-en-v1.5", ModelSHA: "main", DType: "float32", MaxInputLength: 512,
		ExpectedModelSHA: "main", ComparedWith: embedopsv1.ComparedWithSpecRevision,
	}), "without a populator TEI runs the spec's branch and reports it as model_sha")
	_, asked := standIn.askedWith("tei." + namespace + ".svc:8080/info")
	g.Expect(asked).To(BeTrue())
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedRevisionMismatchReason)).To(BeEmpty())
	checkConditions(t, g, key)

	// The pods stay ready but TEI stops answering.
	standIn.setDown(true)
	server = waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.EndpointUnavailableReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(ContainSubstring("503"))
	server = waitForPhase(t, g, key, embedopsv1.PhaseDegraded)
	g.Expect(conditions.IsTrue(server, embedopsv1.ReconcilingCondition)).To(BeTrue())
	g.Expect(conditions.Has(server, embedopsv1.StalledCondition)).To(BeFalse())
	g.Expect(server.Status.Served).NotTo(BeNil(), "the last answer is kept")
	// Until spec.progressDeadline it is progress: no Warning yet.
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.EndpointUnavailableReason)).To(BeEmpty())
	checkConditions(t, g, key)

	standIn.setDown(false)
	waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	server = waitForPhase(t, g, key, embedopsv1.PhaseReady)
	g.Expect(conditions.Has(server, embedopsv1.ReconcilingCondition)).To(BeFalse())
	checkConditions(t, g, key)
}

func TestServerEndpointCheckWarnsOnceOfAnotherServedRevision(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, withEndpointCheck(standIn))
	// A pod still runs an older template, started on another revision.
	const older = "0123456789abcdef0123456789abcdef01234567"
	standIn.startedWith("--revision", older)
	server := startedServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	key := client.ObjectKeyFromObject(server)

	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedRevisionMismatchReason)).To(HaveLen(1))
	}).Should(Succeed())
	server = waitForCondition(t, g, key, embedopsv1.ReadyCondition, metav1.ConditionTrue, embedopsv1.AvailableReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(
		ContainSubstring("TEI serves model revision " + older + ", it was started on main (the spec's revision)"))
	// Rechecks find the same mismatch and stay quiet.
	requestReconcile(t, g, key)
	requestReconcile(t, g, key)
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedRevisionMismatchReason)).To(HaveLen(1))
	g.Expect(getServer(t, g, key).Status.Phase).To(Equal(embedopsv1.PhaseReady))
	checkConditions(t, g, key)
}

func TestServerEndpointCheckComparesTheModelID(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, withEndpointCheck(standIn))
	standIn.startedWith("--model-id", "BAAI/bge-large-en-v1.5")
	server := startedServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))

	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedModelMismatchReason)).To(HaveLen(1))
	}).Should(Succeed())
	server = getServer(t, g, client.ObjectKeyFromObject(server))
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(
		ContainSubstring("TEI serves model BAAI/bge-large-en-v1.5, the spec asks for BAAI/bge-small-en-v1.5"))
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedRevisionMismatchReason)).To(BeEmpty())
}

func TestServerEndpointCheckSendsTheAPIKeyFromItsSecret(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, withEndpointCheck(standIn))
	const key = "tei-api-key-never-shown"
	g.Expect(env.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tei-auth"},
		Data:       map[string][]byte{"key": []byte(key)},
	})).To(Succeed())
	apiKey := corev1.EnvVar{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "tei-auth"}, Key: "key",
	}}}
	server := startedServer(t, g, fixtures.EmbeddingServer(namespace, "tei", fixtures.WithEnv(apiKey)))

	server = waitForPhase(t, g, client.ObjectKeyFromObject(server), embedopsv1.PhaseReady)
	g.Expect(server.Status.Served).NotTo(BeNil())
	g.Expect(server.Status.Served.ModelSHA).To(Equal("main"))
	auth, _ := standIn.askedWith("tei." + namespace + ".svc:8080/info")
	g.Expect(auth).To(Equal("Bearer " + key))
	expectNowhere(t, g, server, key)

	// A key the Secret does not hold: the check says where it looked.
	bad := apiKey.DeepCopy()
	bad.ValueFrom.SecretKeyRef.Key = "missing"
	other := createServer(t, g, fixtures.EmbeddingServer(namespace, "other", fixtures.WithEnv(*bad)))
	waitForStatefulSet(t, g, other)
	markStatefulSetReady(t, g, other)
	server = waitForCondition(t, g, other, embedopsv1.ReadyCondition, metav1.ConditionFalse, embedopsv1.EndpointUnavailableReason)
	g.Expect(conditions.GetMessage(server, embedopsv1.ReadyCondition)).To(
		ContainSubstring(`the API_KEY Secret ` + namespace + `/tei-auth has no key "missing"`))
	expectNowhere(t, g, server, key)
}

// expectNowhere checks that secret is in no status, condition or event.
func expectNowhere(t *testing.T, g *WithT, server *embedopsv1.EmbeddingServer, secret string) {
	t.Helper()
	status, err := json.Marshal(getServer(t, g, client.ObjectKeyFromObject(server)).Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(secret))
	var events corev1.EventList
	g.Expect(env.Client.List(t.Context(), &events)).To(Succeed())
	for _, e := range events.Items {
		g.Expect(strings.Contains(e.Message, secret)).To(BeFalse(), "event %s/%s", e.Namespace, e.Name)
	}
}

func TestServerEndpointCheckOnAPopulatedCacheComparesTheResolvedCommit(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, withPopulator, withEndpointCheck(standIn))
	key := createServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	// No StatefulSet before the resolve Job said which commit main is: the
	// first pods start on it, so the StatefulSet rolls out once.
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionFalse, embedopsv1.DownloadingReason)
	g.Expect(apierrors.IsNotFound(env.Client.Get(t.Context(), key, &appsv1.StatefulSet{}))).To(BeTrue())
	completeResolveJob(t, g, namespace)
	sts := waitForStatefulSet(t, g, key)
	g.Expect(sts.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--revision="+commitA), "the resolved commit from the start")
	g.Expect(sts.Spec.Template.Spec.InitContainers[0].Command).To(ContainElements("--revision", commitA))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Env).NotTo(ContainElement(HaveField("Name", "HF_HUB_OFFLINE")))
	firstGeneration := sts.Generation

	files := []string{"1_Pooling/config.json", "config.json", "onnx/model.onnx", "tokenizer.json", "tokenizer_config.json"}
	message, err := json.Marshal(map[string]any{"resolvedCommit": commitA, "contentDigest": digestA, "files": len(files), "bytes": 90_000_000, "names": files})
	g.Expect(err).NotTo(HaveOccurred())
	createServerPod(t, g, key, "0", terminatedPopulate(0, string(message)))

	// The binding records the commit, the files and their bytes; TEI and
	// the populator then run exactly that commit.
	waitForCondition(t, g, key, embedopsv1.ModelReadyCondition, metav1.ConditionTrue, embedopsv1.DownloadedReason)
	bindingName := waitForBinding(t, g, key, "").Name
	g.Eventually(func(g Gomega) {
		binding := getBinding(t, g, namespace, bindingName)
		g.Expect(binding.Status.Realized).To(Equal(&embedopsv1.RealizedCache{
			ResolvedCommit: commitA, ContentDigest: digestA, Files: files, Bytes: new(int64(90_000_000)),
		}))
	}).Should(Succeed())
	requestReconcile(t, g, key)
	sts = waitForStatefulSet(t, g, key)
	g.Expect(sts.Generation).To(Equal(firstGeneration), "recording what the pods cached rolls nothing out")
	markStatefulSetReady(t, g, key)

	g.Eventually(func(g Gomega) {
		served := getServer(t, g, key).Status.Served
		g.Expect(served).NotTo(BeNil())
		g.Expect(served.ModelSHA).To(Equal(commitA), "TEI reports the commit it was started on")
		g.Expect(served.ExpectedModelSHA).To(Equal(commitA))
		g.Expect(served.ComparedWith).To(Equal(embedopsv1.ComparedWithResolvedCommit))
	}).Should(Succeed())
	g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.ServedRevisionMismatchReason)).To(BeEmpty())
}

func TestServerEndpointCheckOffRecordsNothingServed(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	standIn := newTEIStandIn(t)
	startManager(t, namespace, func(opts *ManagerOptions) {
		opts.EmbeddingServer.EndpointClient = endpoint.NewClient(endpoint.DialTo(standIn.server.Listener.Addr().String()))
	})
	server := startedServer(t, g, fixtures.EmbeddingServer(namespace, "tei"))
	key := client.ObjectKeyFromObject(server)

	server = requestReconcile(t, g, key)
	g.Expect(server.Status.Phase).To(Equal(embedopsv1.PhaseReady))
	g.Expect(server.Status.EndpointCheck).To(Equal(embedopsv1.EndpointCheckDisabled))
	g.Expect(server.Status.Served).To(BeNil())
	_, asked := standIn.askedWith("tei." + namespace + ".svc:8080/info")
	g.Expect(asked).To(BeFalse())
	checkConditions(t, g, key)
}
