package controller

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// withConditions returns a server with the given conditions.
func withConditions(deleting bool, conds ...*metav1.Condition) *embedopsv1.EmbeddingServer {
	s := &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Name: "tei", Namespace: "models", Generation: 1}}
	if deleting {
		s.DeletionTimestamp = new(metav1.Now())
	}
	for _, c := range conds {
		conditions.Set(s, c)
	}
	return s
}

func TestServerPhaseIsDerivedFromConditions(t *testing.T) {
	ready := func(reason string) *metav1.Condition {
		return conditions.TrueCondition(embedopsv1.ReadyCondition, reason, "")
	}
	notReady := func(reason string) *metav1.Condition {
		return conditions.FalseCondition(embedopsv1.ReadyCondition, reason, "")
	}
	stalled := conditions.TrueCondition(embedopsv1.StalledCondition, embedopsv1.ConfigurationInvalidReason, "")
	reconciling := conditions.TrueCondition(embedopsv1.ReconcilingCondition, embedopsv1.ProgressingReason, "")
	downloading := conditions.FalseCondition(embedopsv1.ModelReadyCondition, embedopsv1.DownloadingReason, "")
	cases := []struct {
		name     string
		server   *embedopsv1.EmbeddingServer
		previous embedopsv1.ServerPhase
		want     embedopsv1.ServerPhase
	}{
		{"new", withConditions(false), "", embedopsv1.PhasePending},
		{"initializing", withConditions(false, notReady(embedopsv1.InitializingReason), reconciling), "", embedopsv1.PhasePending},
		{"available", withConditions(false, ready(embedopsv1.AvailableReason)), embedopsv1.PhasePending, embedopsv1.PhaseReady},
		{"available while reconciling", withConditions(false, ready(embedopsv1.AvailableReason), reconciling), "", embedopsv1.PhaseReady},
		{"scaled to zero", withConditions(false, ready(embedopsv1.ScaledToZeroReason)), "", embedopsv1.PhaseScaledToZero},
		{"stalled", withConditions(false, notReady(embedopsv1.ConfigurationInvalidReason), stalled), embedopsv1.PhaseReady, embedopsv1.PhaseFailed},
		{"image pull", withConditions(false, notReady(embedopsv1.ImagePullBackOffReason), reconciling), "", embedopsv1.PhaseDegraded},
		{"out of memory", withConditions(false, notReady(embedopsv1.OOMKilledReason)), "", embedopsv1.PhaseDegraded},
		{"unschedulable", withConditions(false, notReady(embedopsv1.UnschedulableReason)), "", embedopsv1.PhaseDegraded},
		{"downloading by Ready", withConditions(false, notReady(embedopsv1.DownloadingReason)), "", embedopsv1.PhaseDownloading},
		{"downloading by ModelReady", withConditions(false, notReady(embedopsv1.InitializingReason), downloading), "", embedopsv1.PhaseDownloading},
		{"transient error keeps the phase", withConditions(false, notReady(embedopsv1.ProgressingWithRetryReason)), embedopsv1.PhaseReady, embedopsv1.PhaseReady},
		{"transient error first", withConditions(false, notReady(embedopsv1.ProgressingWithRetryReason)), "", embedopsv1.PhasePending},
		{"deleting", withConditions(true, ready(embedopsv1.AvailableReason)), embedopsv1.PhaseReady, embedopsv1.PhaseTerminating},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(serverPhase(tc.server, tc.previous)).To(Equal(tc.want))
			for range 10 {
				g.Expect(serverPhase(tc.server, tc.want)).To(Equal(tc.want), "the phase must not flap")
			}
		})
	}
}

func TestAvailabilityComparesReadyAndDesiredReplicas(t *testing.T) {
	sts := func(generation, observed int64, replicas, ready int32, edits ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Generation: generation},
			Spec:       appsv1.StatefulSetSpec{Replicas: new(replicas)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, Replicas: replicas, ReadyReplicas: ready,
				CurrentReplicas: replicas, UpdatedReplicas: replicas, CurrentRevision: "r1", UpdateRevision: "r1"},
		}
		for _, edit := range edits {
			edit(s)
		}
		return s
	}
	rollingOut := func(s *appsv1.StatefulSet) {
		s.Status.UpdateRevision, s.Status.UpdatedReplicas, s.Status.CurrentReplicas = "r2", 1, 1
	}
	cases := []struct {
		name        string
		desired     int32
		statefulSet *appsv1.StatefulSet
		seen        bool
		want        availability
	}{
		{"not created yet", 1, nil, true, availability{false, embedopsv1.InitializingReason, "0/1 replicas ready"}},
		{"created, never observed", 1, sts(1, 0, 0, 0), true, availability{false, embedopsv1.InitializingReason, "0/1 replicas ready"}},
		{"no pod ready", 2, sts(1, 1, 2, 0), true, availability{false, embedopsv1.InitializingReason, "0/2 replicas ready"}},
		{"some pods ready", 2, sts(1, 1, 2, 1), true, availability{false, embedopsv1.InitializingReason, "1/2 replicas ready"}},
		{"all pods ready", 2, sts(1, 1, 2, 2), true, availability{true, embedopsv1.AvailableReason, "2/2 replicas ready"}},
		{"new generation not observed", 2, sts(2, 1, 2, 2), true, availability{false, embedopsv1.InitializingReason, "2/2 replicas ready; StatefulSet generation 2 not observed yet"}},
		{"the cache has not caught up with the apply", 2, sts(1, 1, 2, 2), false, availability{false, embedopsv1.InitializingReason, "2/2 replicas ready; waiting to observe the StatefulSet just applied"}},
		{"update revision rolling out, old pods ready", 2, sts(2, 2, 2, 2, rollingOut), true, availability{false, embedopsv1.InitializingReason, "2/2 replicas ready; rolling out: current: 1/2"}},
		{"all updated, revisions not swapped yet", 2, sts(2, 2, 2, 2, func(s *appsv1.StatefulSet) { s.Status.UpdateRevision = "r2" }), true,
			availability{false, embedopsv1.InitializingReason, "2/2 replicas ready; rolling out: Waiting for updated revision to match current"}},
		{"zero desired, none running", 0, sts(1, 1, 0, 0), true, availability{true, embedopsv1.ScaledToZeroReason, "scaled to zero replicas"}},
		{"zero desired, not created", 0, nil, true, availability{true, embedopsv1.ScaledToZeroReason, "scaled to zero replicas"}},
		{"zero desired, pods left", 0, sts(2, 2, 1, 1), true, availability{false, embedopsv1.InitializingReason, "scaling to zero: 1 replicas remain"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(availabilityOf(tc.desired, tc.statefulSet, tc.seen)).To(Equal(tc.want))
		})
	}
}

func TestClusterDomainIsADNSSubdomain(t *testing.T) {
	cases := []struct{ configured, want, err string }{
		{"", DefaultClusterDomain, ""},
		{"cluster.local", "cluster.local", ""},
		{"corp.example.", "corp.example", ""},
		{"Corp_Example", "", `invalid cluster domain "Corp_Example"`},
		{".", "", `invalid cluster domain "."`},
	}
	for _, tc := range cases {
		t.Run(tc.configured, func(t *testing.T) {
			g := NewWithT(t)
			domain, err := clusterDomain(tc.configured)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(domain).To(Equal(tc.want))
		})
	}
}

func TestServiceURLIsTheClusterAddress(t *testing.T) {
	g := NewWithT(t)
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "tei", Namespace: "models"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9000}}},
	}
	g.Expect(serviceURL(service, DefaultClusterDomain)).To(Equal("http://tei.models.svc.cluster.local:9000"))
	g.Expect(serviceURL(service, "corp.example")).To(Equal("http://tei.models.svc.corp.example:9000"))
	g.Expect(serviceURL(nil, DefaultClusterDomain)).To(BeEmpty())
}

// A Normal Ready event announces a recovery or a new True reason, never a
// readiness reached by progress alone: each event is a stored write.
func TestReadyIsAnnouncedOnRecoveryOnly(t *testing.T) {
	condition := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: embedopsv1.ReadyCondition, Status: status, Reason: reason}
	}
	available := condition(metav1.ConditionTrue, embedopsv1.AvailableReason)
	tests := []struct {
		name          string
		before, ready *metav1.Condition
		want          bool
	}{
		{"a new server's first observation", nil, available, false},
		{"a new server, or a rollout, done", condition(metav1.ConditionFalse, embedopsv1.InitializingReason), available, false},
		{"a download done", condition(metav1.ConditionFalse, embedopsv1.DownloadingReason), available, false},
		{"a crash loop recovered", condition(metav1.ConditionFalse, embedopsv1.CrashLoopBackOffReason), available, true},
		{"a pod scheduled at last", condition(metav1.ConditionFalse, embedopsv1.UnschedulableReason), available, true},
		{"scaled to zero", available, condition(metav1.ConditionTrue, embedopsv1.ScaledToZeroReason), true},
		{"still Available", available, available, false},
		{"not Ready", nil, condition(metav1.ConditionFalse, embedopsv1.InitializingReason), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(announcesReady(tt.before, tt.ready)).To(Equal(tt.want))
		})
	}
}
