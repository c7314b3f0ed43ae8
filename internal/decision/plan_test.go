package decision_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

// servers is a list of servers, to read a plan's sides at a glance.
func servers(s ...*embedopsv1.EmbeddingServer) []*embedopsv1.EmbeddingServer { return s }

// actions are the actions of a server's caches, in order.
func actions(change decision.ServerChange) []decision.Action {
	var found []decision.Action
	for _, c := range change.Caches {
		found = append(found, c.Action)
	}
	return found
}

// changeOf is the plan's change of server, failing when there is none.
func changeOf(g Gomega, plan *decision.Plan, server string) decision.ServerChange {
	for _, s := range plan.Servers {
		if s.Server == server {
			return s
		}
	}
	g.Expect(plan.Servers).To(ContainElement(HaveField("Server", server)))
	return decision.ServerChange{}
}

func TestPlanTellsWhatEachServerDoesWithItsCache(t *testing.T) {
	es := fixtures.EmbeddingServer
	cases := []struct {
		name    string
		from    []*embedopsv1.EmbeddingServer
		to      []*embedopsv1.EmbeddingServer
		actions []decision.Action
		rolls   bool
	}{
		{"a new server creates its cache", nil, servers(es("ns", "a")), []decision.Action{decision.ActionCreate}, false},
		{"an unchanged server keeps it", servers(es("ns", "a")), servers(es("ns", "a", fixtures.WithReplicas(3))), []decision.Action{decision.ActionKeep}, false},
		{"a new class creates and retires", servers(es("ns", "a")), servers(es("ns", "a", fixtures.WithStorageClass("fast"))),
			[]decision.Action{decision.ActionCreate, decision.ActionRetire}, true},
		{"a new model revision creates and retires", servers(es("ns", "a")), servers(es("ns", "a", fixtures.WithModel(fixtures.Model, "v2"))),
			[]decision.Action{decision.ActionCreate, decision.ActionRetire}, true},
		{"a new retainFor keeps the storage", servers(es("ns", "a")), servers(es("ns", "a", fixtures.WithRetainFor(time.Hour))),
			[]decision.Action{decision.ActionKeepLifetimeChanged}, false},
		{"a removed server retires its cache", servers(es("ns", "a")), nil, []decision.Action{decision.ActionRetire}, false},
		{"dropping the cache retires it and rolls", servers(es("ns", "a")), servers(es("ns", "a", fixtures.WithCacheMode(embedopsv1.CacheModeNone))),
			[]decision.Action{decision.ActionRetire}, true},
		{"adding a cache creates it and rolls", servers(es("ns", "a", fixtures.WithCacheMode(embedopsv1.CacheModeNone))), servers(es("ns", "a")),
			[]decision.Action{decision.ActionCreate}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan, err := decision.NewPlan(tc.from, tc.to, decision.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			change := changeOf(g, plan, "ns/a")
			g.Expect(actions(change)).To(Equal(tc.actions))
			g.Expect(change.Rolls).To(Equal(tc.rolls))
		})
	}
}

func TestPlanRecordsTheLifetimeChange(t *testing.T) {
	g := NewWithT(t)
	before := fixtures.EmbeddingServer("ns", "a", fixtures.WithRetainFor(30*time.Second))
	after := fixtures.EmbeddingServer("ns", "a", fixtures.WithRetainFor(time.Hour))
	plan, err := decision.NewPlan(servers(before), servers(after), decision.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	kept := changeOf(g, plan, "ns/a").Caches[0]
	g.Expect(kept.Supersedes).To(Equal(decision.BindingName(decisionOf(t, before))))
	g.Expect(kept.Binding).To(Equal(decision.BindingName(decisionOf(t, after))))
	g.Expect(kept.PreviousRetainFor).To(Equal(&metav1.Duration{Duration: 30 * time.Second}))
	g.Expect(kept.Decision.RetainFor.Duration).To(Equal(time.Hour))
	g.Expect(kept.Download).To(BeNil(), "the claims are taken over, nothing is downloaded")
	g.Expect(plan.Retires()).To(BeFalse())
}

func TestPlanSharesAndRetiresSharedCachesByUse(t *testing.T) {
	es := fixtures.EmbeddingServer
	shared := fixtures.WithCacheMode(embedopsv1.CacheModeShared)
	g := NewWithT(t)

	// b joins a's Shared cache: kept, nothing downloaded; a's class change
	// leaves it to b alone, so it is not retired.
	plan, err := decision.NewPlan(servers(es("ns", "a", shared)), servers(es("ns", "a", shared, fixtures.WithStorageClass("fast")), es("ns", "b", shared)), decision.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(actions(changeOf(g, plan, "ns/a"))).To(Equal([]decision.Action{decision.ActionCreate}))
	g.Expect(changeOf(g, plan, "ns/a").Rolls).To(BeTrue())
	g.Expect(actions(changeOf(g, plan, "ns/b"))).To(Equal([]decision.Action{decision.ActionKeep}))
	g.Expect(plan.Retires()).To(BeFalse())

	// Two users: a retainFor change cannot take the claims over (the ledger
	// supersedes a binding for its only user), so a gets storage of its own.
	plan, err = decision.NewPlan(servers(es("ns", "a", shared), es("ns", "b", shared)),
		servers(es("ns", "a", shared, fixtures.WithRetainFor(time.Hour)), es("ns", "b", shared)), decision.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(actions(changeOf(g, plan, "ns/a"))).To(Equal([]decision.Action{decision.ActionCreate}))
	g.Expect(changeOf(g, plan, "ns/a").Rolls).To(BeTrue())

	// Two new users of one new Shared cache download it once.
	plan, err = decision.NewPlan(nil, servers(es("ns", "a", shared), es("ns", "b", shared)), decision.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changeOf(g, plan, "ns/a").Caches[0].Download.Copies).To(Equal(int32(1)))
	g.Expect(changeOf(g, plan, "ns/b").Caches[0].Download.Copies).To(BeZero())
}

func TestPlanDownloadsWhatRealizedBindingsRecord(t *testing.T) {
	g := NewWithT(t)
	server := fixtures.EmbeddingServer("ns", "a", fixtures.WithReplicas(2))
	d := decisionOf(t, server)
	realized := func(name string, created time.Time, bytes int64) embedopsv1.ModelCacheBinding {
		b := recordingOf(d, name)
		b.CreationTimestamp = metav1.NewTime(created)
		b.Status.Realized = &embedopsv1.RealizedCache{Bytes: new(bytes)}
		return *b
	}
	other := realized("other", time.Unix(300, 0), 1)
	other.Spec.Identity.Revision = "v2"
	known := []embedopsv1.ModelCacheBinding{realized("old", time.Unix(100, 0), 100), realized("new", time.Unix(200, 0), 133), other}

	plan, err := decision.NewPlan(nil, servers(server), decision.Facts{Bindings: known})
	g.Expect(err).NotTo(HaveOccurred())
	download := changeOf(g, plan, "ns/a").Caches[0].Download
	g.Expect(download.Copies).To(Equal(int32(2)))
	g.Expect(download.BytesPerCopy).To(HaveValue(Equal(int64(133))), "the newest binding of the same model and revision")
	g.Expect(download.Bytes()).To(HaveValue(Equal(int64(266))))

	plan, err = decision.NewPlan(nil, servers(server), decision.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changeOf(g, plan, "ns/a").Caches[0].Download.Bytes()).To(BeNil(), "unknown without bindings")

	// A scale-up of a kept PerReplica cache fills the new replicas' claims.
	plan, err = decision.NewPlan(servers(fixtures.EmbeddingServer("ns", "a")), servers(server), decision.Facts{Bindings: known})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changeOf(g, plan, "ns/a").Caches[0].Download.Bytes()).To(HaveValue(Equal(int64(133))))
}

func TestPlanRefusesAServerItCannotDecide(t *testing.T) {
	g := NewWithT(t)
	bad := fixtures.EmbeddingServer("ns", "a", fixtures.WithCacheMode("Sometimes"))
	_, err := decision.NewPlan(nil, servers(bad), decision.Facts{})
	g.Expect(err).To(MatchError(decision.ErrInvalidSpec))
	g.Expect(err).To(MatchError(ContainSubstring("after the change: server ns/a")))
}

// A move to new storage with spec.rollout.maxSurge: 0 is marked in place,
// so a review sees which servers stop a pod before its successor starts;
// the default surge, or a change that moves no pod, is not.
func TestPlanMarksMovesWithoutSurge(t *testing.T) {
	es := fixtures.EmbeddingServer
	inPlace := fixtures.WithMaxSurge(intstr.FromInt32(0))
	g := NewWithT(t)
	plan, err := decision.NewPlan(servers(es("ns", "gpu", inPlace), es("ns", "cpu"), es("ns", "kept", inPlace)),
		servers(es("ns", "gpu", inPlace, fixtures.WithStorageClass("fast")), es("ns", "cpu", fixtures.WithStorageClass("fast")),
			es("ns", "kept", inPlace, fixtures.WithRetainFor(time.Hour))), decision.Facts{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changeOf(g, plan, "ns/gpu")).To(And(HaveField("Rolls", BeTrue()), HaveField("InPlace", BeTrue())))
	g.Expect(changeOf(g, plan, "ns/cpu")).To(And(HaveField("Rolls", BeTrue()), HaveField("InPlace", BeFalse())))
	g.Expect(changeOf(g, plan, "ns/kept").InPlace).To(BeFalse(), "a new lifetime moves no pod")

	g.Expect(decision.ReplacesInPlace(es("ns", "a", fixtures.WithMaxSurge(intstr.FromString("0%"))))).To(BeTrue())
	g.Expect(decision.ReplacesInPlace(es("ns", "a", fixtures.WithMaxSurge(intstr.FromString("10%"))))).To(BeFalse(), "10% of one replica rounds up to 1")
	g.Expect(decision.ReplacesInPlace(es("ns", "a"))).To(BeFalse())
}
