package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// ScaleUpReport is the scale-up benchmark's result. Request counts are the
// controller's, from the API server's audit log, about objects in the
// servers' namespace, from the first replicas patch until the controller's
// requests settled after every server was Ready at ToReplicas; per-replica
// figures divide by NewReplicas.
type ScaleUpReport struct {
	Servers      int    `json:"servers"`
	Seed         string `json:"seed"`
	FromReplicas int32  `json:"fromReplicas"`
	ToReplicas   int32  `json:"toReplicas"`
	// NewReplicas is Servers times (ToReplicas - FromReplicas).
	NewReplicas int `json:"newReplicas"`
	Nodes       int `json:"nodes"`
	// ProvisionDelaySeconds is the provisioner's time per volume.
	ProvisionDelaySeconds float64 `json:"provisionDelaySeconds"`

	// ReadySeconds runs from the first replicas patch until every server
	// is Ready (Available, current generation) with ToReplicas ready
	// replicas; ReadyMedianSeconds until half of them are. Both are seen
	// by a poll every second.
	ReadySeconds       float64 `json:"readySeconds"`
	ReadyMedianSeconds float64 `json:"readyMedianSeconds"`
	// ClaimsCreated and VolumesProvisioned are when, after the first
	// replicas patch, the new claims were created and the volumes bound to
	// them: the last and the median, from the objects' creation
	// timestamps (whole seconds).
	ClaimsCreated      Spread `json:"claimsCreated"`
	VolumesProvisioned Spread `json:"volumesProvisioned"`
	// ControllerCPUShareOfScaleUp is controller CPU seconds per wall second
	// until every server was Ready (1 = one core).
	ControllerCPUShareOfScaleUp float64 `json:"controllerCPUShareOfScaleUp"`
	// LimiterWaitSeconds is how long client-go's rate limiter held the
	// controller's requests back until every server was Ready, added up
	// over the requests; LimiterShareOfRequestTime divides it by that plus
	// the time the requests took once sent (as ScaleReport's).
	LimiterWaitSeconds        float64 `json:"limiterWaitSeconds"`
	LimiterShareOfRequestTime float64 `json:"limiterShareOfRequestTime"`
	// RequestSeconds is the time the controller's requests took once sent
	// until every server was Ready, added up over the requests.
	RequestSeconds float64 `json:"requestSeconds"`

	RequestsPerNewReplica float64        `json:"requestsPerNewReplica"`
	WritesPerNewReplica   float64        `json:"writesPerNewReplica"`
	RequestsByResource    map[string]int `json:"requestsByResource"`
	WritesByResource      map[string]int `json:"writesByResource"`
	// ByCause breaks the requests and writes down by what each was for
	// (Counts.Causes), totals over all servers.
	ByCause map[string]CauseCount `json:"byCause"`
	// ClusterWrites are the stored writes of every client (the controller,
	// kube-controller-manager, the provisioner, kwok...) to the namespace
	// over the same window, by the program of their user agent.
	ClusterWritesPerNewReplica float64        `json:"clusterWritesPerNewReplica"`
	ClusterWritesByAgent       map[string]int `json:"clusterWritesByAgent"`

	// NewClaims are the claims the scale-up created, by data source.
	NewClaims ClaimSources `json:"newClaims"`
	// ClaimFills counts the bindings' records of filled claims
	// (status.claimFills) by method; ClaimFallbacks those that record a
	// copy abandoned for a download.
	ClaimFills     map[string]int `json:"claimFills"`
	ClaimFallbacks int            `json:"claimFallbacks"`
	// Snapshots are the VolumeSnapshots in the namespace afterwards.
	Snapshots int `json:"snapshots"`

	// ControllerArgs are the controller's flags beyond the harness'.
	ControllerArgs []string `json:"controllerArgs"`
	// Phases are the wall times of the phases, in order.
	Phases []PhaseTime `json:"phases"`
}

// Spread is the median and the last of a set of times, in seconds.
type Spread struct {
	MedianSeconds float64 `json:"medianSeconds"`
	LastSeconds   float64 `json:"lastSeconds"`
}

// spreadOf is the spread of times, which it sorts; zero for none.
func spreadOf(times []float64) Spread {
	if len(times) == 0 {
		return Spread{}
	}
	slices.Sort(times)
	return Spread{MedianSeconds: round(nearestRank(times, 0.5)), LastSeconds: round(times[len(times)-1])}
}

// String shows the spread as "<last> (median <median>)".
func (s Spread) String() string {
	return fmt.Sprintf("%s (median %s)", seconds(s.LastSeconds), seconds(s.MedianSeconds))
}

// claimTimes are the seconds after the scale-up began at which its claims
// were created and their volumes provisioned.
type claimTimes struct {
	created, provisioned []float64
}

// newClaimTimes times the claims not among before against started, to the
// second as the API server stores creation timestamps: their creation, and
// that of the volume whose claimRef names each, if any.
func newClaimTimes(claims []corev1.PersistentVolumeClaim, volumes []corev1.PersistentVolume, before map[string]bool, started time.Time) claimTimes {
	started = started.Truncate(time.Second)
	volumeOf := map[types.NamespacedName]time.Time{}
	for i := range volumes {
		if ref := volumes[i].Spec.ClaimRef; ref != nil {
			volumeOf[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}] = volumes[i].CreationTimestamp.Time
		}
	}
	var times claimTimes
	for i := range claims {
		if before[claims[i].Name] {
			continue
		}
		times.created = append(times.created, claims[i].CreationTimestamp.Sub(started).Seconds())
		if made, ok := volumeOf[types.NamespacedName{Namespace: claims[i].Namespace, Name: claims[i].Name}]; ok {
			times.provisioned = append(times.provisioned, made.Sub(started).Seconds())
		}
	}
	return times
}

// setClaimTimes records the spreads of the new claims' times.
func (r *ScaleUpReport) setClaimTimes(times claimTimes) {
	r.ClaimsCreated, r.VolumesProvisioned = spreadOf(times.created), spreadOf(times.provisioned)
}

// ClaimSources counts claims by the kind their spec.dataSourceRef names.
type ClaimSources struct {
	// Clones name a PersistentVolumeClaim (CSI volume cloning).
	Clones int `json:"clones"`
	// Restores name a VolumeSnapshot.
	Restores int `json:"restores"`
	// Empty name nothing: the replica's populator fills them from the hub.
	Empty int `json:"empty"`
	// Other name any other kind.
	Other int `json:"other"`
}

// newScaleUpReport is the report of a run with opts, the controller given
// args beyond the harness' flags.
func newScaleUpReport(opts ScaleUpOptions, args []string) *ScaleUpReport {
	return &ScaleUpReport{
		Servers: opts.Servers, Seed: string(opts.Seed), FromReplicas: scaleUpFrom, ToReplicas: scaleUpTo,
		NewReplicas: newReplicas(opts.Servers, scaleUpFrom, scaleUpTo),
		Nodes:       opts.Nodes(), ProvisionDelaySeconds: opts.ProvisionDelay.Seconds(),
		ControllerArgs: append([]string{}, args...),
	}
}

// newReplicas is how many replicas scaling servers from one count to
// another adds.
func newReplicas(servers int, from, to int32) int {
	return max(0, servers*int(to-from))
}

// perNewReplica divides n by the new replicas; 0 without any.
func (r *ScaleUpReport) perNewReplica(n int) float64 {
	if r.NewReplicas == 0 {
		return 0
	}
	return round(float64(n) / float64(r.NewReplicas))
}

// setReady records when the servers were first seen Ready, in order, and
// the controller's CPU seconds until the last was.
func (r *ScaleUpReport) setReady(times []float64, cpuSeconds float64) {
	if len(times) == 0 {
		return
	}
	r.ReadySeconds = round(times[len(times)-1])
	r.ReadyMedianSeconds = round(nearestRank(times, 0.5))
	if r.ReadySeconds > 0 {
		r.ControllerCPUShareOfScaleUp = round(cpuSeconds / r.ReadySeconds)
	}
}

// nearestRank is the q-quantile of sorted by the nearest-rank method.
func nearestRank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// setLimiter records the controller's client times until every server was
// Ready.
func (r *ScaleUpReport) setLimiter(waited, sent float64) {
	r.LimiterWaitSeconds, r.LimiterShareOfRequestTime = round(waited), limiterShare(waited, sent)
	r.RequestSeconds = round(sent)
}

// setRequests records the controller's requests over the scale-up.
func (r *ScaleUpReport) setRequests(counts Counts) {
	r.RequestsPerNewReplica = r.perNewReplica(Total(counts.Requests))
	r.WritesPerNewReplica = r.perNewReplica(Total(counts.Writes))
	r.RequestsByResource, r.WritesByResource, r.ByCause = counts.Requests, counts.Writes, counts.Causes
}

// setClusterWrites records every client's stored writes over the scale-up.
func (r *ScaleUpReport) setClusterWrites(writes []ObjectWrite) {
	byAgent := map[string]int{}
	for _, write := range writes {
		byAgent[agentProgram(write.UserAgent)]++
	}
	r.ClusterWritesPerNewReplica = r.perNewReplica(len(writes))
	r.ClusterWritesByAgent = byAgent
}

// agentProgram is the program a user agent names, client-go's
// "<binary>/<version> (<os>/<arch>) ..." up to its first slash.
func agentProgram(userAgent string) string {
	program, _, _ := strings.Cut(userAgent, "/")
	if program == "" {
		return "(none)"
	}
	return program
}

// classifyClaims counts the claims not among before by the kind their
// dataSourceRef (else dataSource) names.
func classifyClaims(claims []corev1.PersistentVolumeClaim, before map[string]bool) ClaimSources {
	var sources ClaimSources
	for i := range claims {
		if before[claims[i].Name] {
			continue
		}
		switch sourceKind(&claims[i]) {
		case "":
			sources.Empty++
		case pvcSourceKind:
			sources.Clones++
		case snapshotSourceKind:
			sources.Restores++
		default:
			sources.Other++
		}
	}
	return sources
}

// The data source kinds of a copied claim.
const (
	pvcSourceKind      = "PersistentVolumeClaim"
	snapshotSourceKind = "VolumeSnapshot"
)

// sourceKind is the kind the claim's dataSourceRef, else its dataSource,
// names; "" for none.
func sourceKind(claim *corev1.PersistentVolumeClaim) string {
	switch {
	case claim.Spec.DataSourceRef != nil:
		return claim.Spec.DataSourceRef.Kind
	case claim.Spec.DataSource != nil:
		return claim.Spec.DataSource.Kind
	}
	return ""
}

// fillsByMethod counts the bindings' claim records by method, and those
// recording a fallback.
func fillsByMethod(bindings []embedopsv1.ModelCacheBinding) (map[string]int, int) {
	byMethod, fallbacks := map[string]int{}, 0
	for i := range bindings {
		for _, fill := range bindings[i].Status.ClaimFills {
			byMethod[string(fill.Method)]++
			if fill.Fallback != "" {
				fallbacks++
			}
		}
	}
	return byMethod, fallbacks
}

// Rows lays the report out as a table.
func (r *ScaleUpReport) Rows() []Row {
	rows := []Row{
		{"servers", fmt.Sprint(r.Servers), fmt.Sprintf("PerReplica, spec.cache.seed %s, populator on; on %d kwok nodes; claims bind %gs after the provisioner picks them up", r.Seed, r.Nodes, r.ProvisionDelaySeconds)},
		{"newReplicas", fmt.Sprint(r.NewReplicas), fmt.Sprintf("every server scaled %d -> %d once its binding recorded a commit and its pods reported it", r.FromReplicas, r.ToReplicas)},
		{"readySeconds", seconds(r.ReadySeconds), fmt.Sprintf("first replicas patch to every server Ready at %d ready replicas (current generation); half of them by %s", r.ToReplicas, seconds(r.ReadyMedianSeconds))},
		{"newClaimsCreated", r.ClaimsCreated.String(), "seconds after the first replicas patch's, by the claims' creationTimestamp (whole seconds)"},
		{"newVolumesProvisioned", r.VolumesProvisioned.String(), "likewise, by the creationTimestamp of the volume bound to each new claim"},
		{"controllerCPUShareOfScaleUp", fmt.Sprint(r.ControllerCPUShareOfScaleUp), "controller CPU s / wall s until every server was Ready (1 = one core)"},
		{"limiterShareOfRequestTime", fmt.Sprint(r.LimiterShareOfRequestTime), fmt.Sprintf("client rate limiter wait / (wait + request time) until every server was Ready; %s waited, %s in requests once sent, in all", seconds(r.LimiterWaitSeconds), seconds(r.RequestSeconds))},
		{"requestsPerNewReplica", fmt.Sprint(r.RequestsPerNewReplica), "audit log, controller's user agent, first patch until its requests settled; dry runs are requests"},
		{"writesPerNewReplica", fmt.Sprint(r.WritesPerNewReplica), fmt.Sprintf("successful, not dry runs: %v", r.WritesByResource)},
		{"clusterWritesPerNewReplica", fmt.Sprint(r.ClusterWritesPerNewReplica), fmt.Sprintf("every client's stored writes to the namespace, same window (bench: the replicas patches and the harness's CSI stand-in): %v", r.ClusterWritesByAgent)},
		{"newClaims", fmt.Sprintf("%d clones, %d restores, %d empty", r.NewClaims.Clones, r.NewClaims.Restores, r.NewClaims.Empty),
			fmt.Sprintf("spec.dataSourceRef kind PersistentVolumeClaim, VolumeSnapshot, none; %d of another kind", r.NewClaims.Other)},
		{"claimFills", fmt.Sprint(r.ClaimFills), fmt.Sprintf("the bindings' status.claimFills by method; %d record a fallback to a download", r.ClaimFallbacks)},
		{"snapshots", fmt.Sprint(r.Snapshots), "VolumeSnapshots in the namespace afterwards"},
	}
	rows = append(rows, causeRows("scale-up: ", "new replica", r.ByCause, r.perNewReplica)...)
	rows = append(rows, Row{"controllerArgs", fmt.Sprint(r.ControllerArgs), "beyond the harness' (kubeconfig, metrics, health)"})
	for _, phase := range r.Phases {
		rows = append(rows, Row{"phase " + phase.Phase, seconds(phase.Seconds), "wall time"})
	}
	return rows
}
