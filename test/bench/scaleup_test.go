package bench

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/harness"
)

func TestScaleUpFiguresArePerNewReplica(t *testing.T) {
	g := NewWithT(t)
	report := newScaleUpReport(ScaleUpOptions{Servers: 100, Seed: embedopsv1.CacheSeedClone}, nil)
	g.Expect(report.NewReplicas).To(Equal(200), "100 servers scaled 1 -> 3")

	report.setRequests(Counts{
		Requests: map[string]int{"persistentvolumeclaims": 200, "embeddingservers/status": 301},
		Writes:   map[string]int{"persistentvolumeclaims": 200, "events": 100},
	})
	report.setClusterWrites([]ObjectWrite{
		{UserAgent: "embedops-bench-controller/v0.0.0 (linux/amd64)"},
		{UserAgent: "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:statefulset-controller"},
		{UserAgent: ""},
	})

	g.Expect(report.RequestsPerNewReplica).To(Equal(2.505))
	g.Expect(report.WritesPerNewReplica).To(Equal(1.5))
	g.Expect(report.ClusterWritesPerNewReplica).To(Equal(0.015))
	g.Expect(report.ClusterWritesByAgent).To(Equal(map[string]int{"embedops-bench-controller": 1, "kube-controller-manager": 1, "(none)": 1}))
}

func TestScaleUpWithoutNewReplicasDividesByNothing(t *testing.T) {
	g := NewWithT(t)
	g.Expect(newReplicas(0, 1, 3)).To(Equal(0))
	g.Expect(newReplicas(5, 3, 1)).To(Equal(0), "a scale-down adds no replica")
	g.Expect((&ScaleUpReport{}).perNewReplica(7)).To(BeZero())
}

func TestScaleUpReadyTimesAreTheLastAndTheMedian(t *testing.T) {
	g := NewWithT(t)
	report := &ScaleUpReport{}

	report.setReady([]float64{10, 11, 12, 40}, 8)

	g.Expect(report.ReadySeconds).To(Equal(40.0))
	g.Expect(report.ReadyMedianSeconds).To(Equal(11.0), "nearest rank: the 2nd of 4")
	g.Expect(report.ControllerCPUShareOfScaleUp).To(Equal(0.2))
	g.Expect(nearestRank([]float64{3}, 0.5)).To(Equal(3.0))
}

func TestNewClaimsAreClassifiedByTheirDataSource(t *testing.T) {
	claim := func(name string, ref *corev1.TypedObjectReference) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{DataSourceRef: ref}}
	}
	legacy := claim("cache-s1-2", nil)
	legacy.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", Name: "snap"}
	claims := []corev1.PersistentVolumeClaim{
		claim("cache-s0-0", nil),
		claim("cache-s0-1", &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "cache-s0-0"}),
		claim("cache-s0-2", nil),
		claim("cache-s1-1", &corev1.TypedObjectReference{Kind: "VolumeSnapshot", Name: "snap"}),
		legacy,
		claim("cache-s2-1", &corev1.TypedObjectReference{Kind: "Populator", Name: "p"}),
	}

	sources := classifyClaims(claims, map[string]bool{"cache-s0-0": true})

	NewWithT(t).Expect(sources).To(Equal(ClaimSources{Clones: 1, Restores: 2, Empty: 1, Other: 1}))
}

func TestClaimFillsAreCountedByMethod(t *testing.T) {
	bindings := []embedopsv1.ModelCacheBinding{{}, {}}
	bindings[0].Status.ClaimFills = []embedopsv1.ClaimFill{
		{Name: "a", Method: embedopsv1.ClaimFilledByClone},
		{Name: "b", Method: embedopsv1.ClaimFilledByDownload, Fallback: "not bound"},
	}
	bindings[1].Status.ClaimFills = []embedopsv1.ClaimFill{{Name: "c", Method: embedopsv1.ClaimFilledByClone}}

	byMethod, fallbacks := fillsByMethod(bindings)

	g := NewWithT(t)
	g.Expect(byMethod).To(Equal(map[string]int{"Clone": 2, "Download": 1}))
	g.Expect(fallbacks).To(Equal(1))
}

func TestPopulatedReplicasReportTheRecordedCommitAndDigest(t *testing.T) {
	pod := func(server, message string, exitCode int32) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{embedopsv1.NameLabel: server}}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
			Name:  builder.PopulateContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: message}},
		}}
		return p
	}
	simulated := `{"resolvedCommit":"` + harness.SimulatedPopulateCommit + `","contentDigest":"` + harness.SimulatedPopulateDigest + `"}`
	realized := &embedopsv1.RealizedCache{ResolvedCommit: harness.SimulatedPopulateCommit, ContentDigest: harness.SimulatedPopulateDigest}
	pods := []corev1.Pod{
		pod("s0", simulated, 0),
		pod("s0", simulated, 1),
		pod("s0", "not json", 0),
		pod("s0", `{"resolvedCommit":"other","contentDigest":"`+harness.SimulatedPopulateDigest+`"}`, 0),
		pod("s1", simulated, 0),
		{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{embedopsv1.NameLabel: "s0"}}},
	}

	g := NewWithT(t)
	g.Expect(populatedReplicas(pods, "s0", realized)).To(Equal(1))
	g.Expect(populatedReplicas(pods, "s0", &embedopsv1.RealizedCache{ResolvedCommit: harness.SimulatedPopulateCommit})).To(BeZero(),
		"no digest recorded yet")
	g.Expect(populatedReplicas(pods, "s0", nil)).To(BeZero())
}

func TestParseSeedTakesTheAPIsValues(t *testing.T) {
	g := NewWithT(t)
	for _, seed := range []string{"Auto", "Clone", "Snapshot", "Download"} {
		parsed, err := ParseSeed(seed)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(parsed)).To(Equal(seed))
	}
	_, err := ParseSeed("clone")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown seed "clone"`)))
}

func TestScaleUpRowsNameTheClaimsAndTheCauses(t *testing.T) {
	g := NewWithT(t)
	report := newScaleUpReport(ScaleUpOptions{Servers: 2, Seed: embedopsv1.CacheSeedClone}, []string{"--populator-image=x"})
	report.NewClaims = ClaimSources{Clones: 3, Empty: 1}
	report.ByCause = map[string]CauseCount{"create persistentvolumeclaims": {Requests: 3, Writes: 3}, "get pods": {Requests: 8}}

	rows := report.Rows()

	g.Expect(rows).To(ContainElement(Row{"newClaims", "3 clones, 0 restores, 1 empty", "spec.dataSourceRef kind PersistentVolumeClaim, VolumeSnapshot, none; 0 of another kind"}))
	g.Expect(rows).To(ContainElement(HaveField("Metric", "scale-up: get pods")))
	var causes []string
	for _, row := range rows {
		if len(row.Metric) > 10 && row.Metric[:10] == "scale-up: " {
			causes = append(causes, row.Metric+" "+row.Value)
		}
	}
	g.Expect(causes).To(Equal([]string{"scale-up: get pods 2", "scale-up: create persistentvolumeclaims 0.75"}), "the most frequent first, per new replica")
}

func TestNewClaimsAreTimedFromTheScaleUp(t *testing.T) {
	// The API server stores whole seconds; the scale-up begins within one.
	started := time.Date(2026, 1, 2, 3, 4, 5, 6e8, time.UTC)
	at := func(seconds int) metav1.Time {
		return metav1.NewTime(started.Add(time.Duration(seconds) * time.Second).Truncate(time.Second))
	}
	claim := func(name string, created int) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: at(created)}}
	}
	volume := func(namespace, claim string, created int) corev1.PersistentVolume {
		v := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(created)}}
		v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: namespace, Name: claim}
		return v
	}
	claims := []corev1.PersistentVolumeClaim{claim("old", -60), claim("a", 0), claim("b", 2), claim("c", 3)}
	volumes := []corev1.PersistentVolume{volume("ns", "old", -50), volume("ns", "a", 12), volume("ns", "b", 30), volume("other", "c", 5), {}}

	report := &ScaleUpReport{}
	report.setClaimTimes(newClaimTimes(claims, volumes, map[string]bool{"old": true}, started))

	g := NewWithT(t)
	g.Expect(report.ClaimsCreated).To(Equal(Spread{MedianSeconds: 2, LastSeconds: 3}), "whole seconds from the scale-up's, none before it")
	g.Expect(report.VolumesProvisioned).To(Equal(Spread{MedianSeconds: 12, LastSeconds: 30}), "c's volume is another namespace's claim's")
	g.Expect(report.VolumesProvisioned.String()).To(Equal("30.000s (median 12.000s)"))
	g.Expect(spreadOf(nil)).To(BeZero())
}

func TestLimiterShareIsTheWaitOverAllRequestTime(t *testing.T) {
	g := NewWithT(t)
	report := &ScaleUpReport{}
	report.setLimiter(3, 1)
	g.Expect(report.LimiterWaitSeconds).To(Equal(3.0))
	g.Expect(report.LimiterShareOfRequestTime).To(Equal(0.75))
	g.Expect(report.RequestSeconds).To(Equal(1.0))
	g.Expect(limiterShare(0, 0)).To(BeZero())
}
