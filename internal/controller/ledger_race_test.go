package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/controller/ledger"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// newTestLedger is a ledger writing through an unthrottled client, so racing
// writers meet at the API server, not in a client-side rate limiter. Its
// reads come from an informer cache with the manager's binding index,
// wrapped by wrap (nil: unwrapped); the returned client is direct. opts,
// when given, configure the ledger; it references at once unless they set
// a FirstReferenceWait.
func newTestLedger(t *testing.T, g *WithT, wrap func(client.Client) client.Client, opts ...ledger.Options) (*ledger.Ledger, client.Client) {
	t.Helper()
	recorder, err := events.NewRecorder(testr.New(t), "", "test", events.WithScheme(env.Scheme), events.WithLegacyEventRecorder(&record.FakeRecorder{}))
	g.Expect(err).NotTo(HaveOccurred())
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 10000, 10000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	informers, err := cache.New(cfg, cache.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(informers.IndexField(t.Context(), &embedopsv1.ModelCacheBinding{}, ledger.ReferenceIndex, ledger.ReferencedServers)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = informers.Start(ctx) }()
	g.Expect(informers.WaitForCacheSync(t.Context())).To(BeTrue())
	var reads client.Client
	reads, err = client.New(cfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: informers}})
	g.Expect(err).NotTo(HaveOccurred())
	// Start the informers the ledger reads before it runs.
	for _, list := range []client.ObjectList{&embedopsv1.ModelCacheBindingList{}, &embedopsv1.EmbeddingServerList{}, &corev1.PersistentVolumeClaimList{}} {
		g.Expect(reads.List(t.Context(), list)).To(Succeed())
	}
	if wrap != nil {
		reads = wrap(reads)
	}
	options := append(opts, ledger.Options{})[0]
	if options.FirstReferenceWait == 0 {
		// envtest binds no claim: reference at once unless a test asks
		// for the wait (ledger_firstref_test).
		options.FirstReferenceWait = -1
	}
	return ledger.New(reads, c, recorder, options), c
}

// liveServer creates a server as a reconciled one is, with the server
// finalizer, and returns it as the API server defaulted it.
func liveServer(t *testing.T, g *WithT, c client.Client, namespace, name string, options ...fixtures.Option) *embedopsv1.EmbeddingServer {
	t.Helper()
	server := fixtures.EmbeddingServer(namespace, name, options...)
	server.Finalizers = []string{embedopsv1.ServerFinalizer}
	g.Expect(c.Create(t.Context(), server)).To(Succeed())
	return server
}

// unknownSource is the provenance of a server no GitOps tool applied.
func unknownSource(context.Context) (embedopsv1.DecisionSource, error) {
	return embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: metav1.Now()}, nil
}

func TestRetirementRacesWithAServerReferencingTheBinding(t *testing.T) {
	t.Parallel()
	g := newG(t)
	namespace := harness.Namespace(t, env.Client)
	l, c := newTestLedger(t, g, nil)

	const rounds = 200
	var added, retired, violations int
	for round := range rounds {
		server := liveServer(t, g, c, namespace, fmt.Sprintf("s%d", round), fixtures.WithRetainFor(0))
		outcome := raceRound(t, g, l, c, server, round%12-6)
		if outcome.added {
			added++
		} else {
			retired++
		}
		if outcome.violation != "" {
			violations++
			t.Errorf("round %d: %s", round, outcome.violation)
		}
	}
	t.Logf("rounds %d: reference added %d, retired first %d, claims deleted while referenced %d", rounds, added, retired, violations)
	g.Expect(violations).To(BeZero())
	g.Expect(added).To(BeNumerically(">", 0), "the server must win some rounds, or the race was not run")
	g.Expect(retired).To(BeNumerically(">", 0), "the retirement must win some rounds, or the race was not run")
}

// raceOutcome is one round of TestRetirementRacesWithAServerReferencingTheBinding.
type raceOutcome struct {
	added     bool
	violation string
}

// raceRound gives a live server's decision an idle binding past its
// retireAfter, with a claim, then runs the ledger's retirement and the
// server's Bind at once. Bind first reads the binding lead times, as a
// reconcile reads before it writes; a negative lead has the retirement
// read -lead times first instead, so that either side wins some rounds
// however loaded the machine is (with only the server reading first, a
// loaded machine had the retirement win all 200 rounds). A binding the
// server references afterwards must be Active with its claim.
func raceRound(t *testing.T, g *WithT, l *ledger.Ledger, c client.Client, server *embedopsv1.EmbeddingServer, lead int) raceOutcome {
	t.Helper()
	d, err := decision.For(server)
	g.Expect(err).NotTo(HaveOccurred())
	binding := idleBinding(t, g, c, server, d)
	key := client.ObjectKeyFromObject(binding)
	read := func() *embedopsv1.ModelCacheBinding {
		b := &embedopsv1.ModelCacheBinding{}
		g.Expect(c.Get(t.Context(), key, b)).To(Succeed())
		return b
	}
	forRetirement := read()
	var bound ledger.Bound
	var bindErr error
	var wg sync.WaitGroup
	start := make(chan struct{})
	readFirst := func(n int) {
		for range n {
			_ = c.Get(t.Context(), key, &embedopsv1.ModelCacheBinding{})
		}
	}
	wg.Go(func() {
		<-start
		readFirst(-lead)
		_, _ = l.Advance(t.Context(), forRetirement)
	})
	wg.Go(func() {
		<-start
		readFirst(lead)
		bound, bindErr = l.Bind(t.Context(), server, d, unknownSource)
	})
	close(start)
	wg.Wait()

	// The next look, from a fresh read, finishes what was started.
	_, err = l.Advance(t.Context(), read())
	g.Expect(err).NotTo(HaveOccurred())
	after := read()
	claim := &corev1.PersistentVolumeClaim{}
	claimKey := client.ObjectKey{Namespace: key.Namespace, Name: binding.Spec.Resources.PersistentVolumeClaimNames[0]}
	claimErr := c.Get(t.Context(), claimKey, claim)
	if bindErr != nil || bound.Binding.Name != binding.Name {
		if after.Status.Phase == embedopsv1.BindingActive {
			return raceOutcome{violation: fmt.Sprintf("the server did not get the Active binding (%v)", bindErr)}
		}
		return raceOutcome{}
	}
	outcome := raceOutcome{added: true}
	switch {
	case !decision.HasReference(after, server.UID):
		outcome.violation = "the server was told it holds the binding, which does not list it"
	case after.Status.Phase != embedopsv1.BindingActive:
		outcome.violation = fmt.Sprintf("the server references the binding, which is %s", after.Status.Phase)
	case claimErr != nil || !claim.DeletionTimestamp.IsZero():
		outcome.violation = fmt.Sprintf("the server references the binding, whose claim was deleted: %v", claimErr)
	}
	return outcome
}

// idleBinding creates the Active binding of the server's decision with zero
// references and a retireAfter that has passed, and its claim, named and
// labelled as the StatefulSet controller would make it.
func idleBinding(t *testing.T, g *WithT, c client.Client, server *embedopsv1.EmbeddingServer, d *decision.Decision) *embedopsv1.ModelCacheBinding {
	t.Helper()
	binding := builder.Binding(server, d, decision.BindingName(d), embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: metav1.Now()})
	binding.Spec.Resources.PersistentVolumeClaimNames = binding.Spec.Resources.PersistentVolumeClaimNames[:1]
	g.Expect(c.Create(t.Context(), binding)).To(Succeed())
	past := metav1.NewTime(time.Now().Add(-time.Second))
	binding.Status = embedopsv1.ModelCacheBindingStatus{Phase: embedopsv1.BindingActive, IdleSince: &past, RetireAfter: &past}
	g.Expect(c.Status().Update(t.Context(), binding)).To(Succeed())
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: binding.Namespace, Name: binding.Spec.Resources.PersistentVolumeClaimNames[0],
			Labels: map[string]string{embedopsv1.CacheBindingLabel: binding.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: d.Decision.AccessModes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: d.Decision.Size}},
		},
	}
	g.Expect(c.Create(t.Context(), claim)).To(Succeed())
	return binding
}
