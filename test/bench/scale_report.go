package bench

import (
	"math"
	"time"
)

// withinTolerance is how far, relatively, memory may move when unrelated
// objects appear.
const withinTolerance = 0.10

// statusWrites is the resource of the servers' status writes.
const statusWrites = "embeddingservers/status"

// ScaleReport is the scale benchmark's result. Request counts are the
// controller's, from the API server's audit log, about objects in the
// servers' namespace; per-server figures divide by Servers.
type ScaleReport struct {
	Servers             int `json:"servers"`
	UnrelatedPods       int `json:"unrelatedPods"`
	UnrelatedConfigMaps int `json:"unrelatedConfigMaps"`
	UnrelatedSecrets    int `json:"unrelatedSecrets"`
	Nodes               int `json:"nodes"`
	// ProvisionDelaySeconds is the provisioner's time per volume.
	ProvisionDelaySeconds float64 `json:"provisionDelaySeconds"`

	// ConvergeSeconds runs from the first create until every server is
	// Ready (Available, current generation) and names an Active binding.
	ConvergeSeconds  float64 `json:"convergeSeconds"`
	ServersPerSecond float64 `json:"serversPerSecond"`
	// ControllerCPUShareOfConvergence is controller CPU seconds per wall
	// second during convergence (1 = one core).
	ControllerCPUShareOfConvergence float64 `json:"controllerCPUShareOfConvergence"`
	// LimiterWaitSeconds is how long client-go's rate limiter held the
	// controller's requests back during convergence, added up over the
	// requests (rest_client_rate_limiter_duration_seconds);
	// LimiterShareOfRequestTime divides it by that plus the time the
	// requests took once sent (rest_client_request_duration_seconds).
	LimiterWaitSeconds        float64 `json:"limiterWaitSeconds"`
	LimiterShareOfRequestTime float64 `json:"limiterShareOfRequestTime"`
	// Create counts run until the requests settled after convergence.
	RequestsPerServerCreate float64        `json:"requestsPerServerCreate"`
	WritesPerServerCreate   float64        `json:"writesPerServerCreate"`
	CreateWritesByResource  map[string]int `json:"createWritesByResource"`
	// CreateByCause breaks the creation requests and writes down by what
	// each was for (Counts.Causes), totals over all servers.
	CreateByCause map[string]CauseCount `json:"createByCause"`

	// Resyncs is how many rounds of each forced resync every server got;
	// the figures of a resync add up all of its rounds. Steady-state
	// figures are reconcile requests (reconcile.fluxcd.io/requestedAt),
	// each acknowledged by one status write by design.
	Resyncs                          int            `json:"resyncs"`
	SteadyStateRequestsPerServer     float64        `json:"steadyStateRequestsPerServer"`
	SteadyStateWritesPerServer       float64        `json:"steadyStateWritesPerServer"`
	SteadyStateStatusWritesPerServer float64        `json:"steadyStateStatusWritesPerServer"`
	SteadyStateOtherWritesPerServer  float64        `json:"steadyStateOtherWritesPerServer"`
	SteadyStateWritesByResource      map[string]int `json:"steadyStateWritesByResource"`
	// RequestsPerSteadyReconcile divides the steady-state requests by the
	// reconcile requests (servers times resyncs).
	RequestsPerSteadyReconcile float64 `json:"requestsPerSteadyReconcile"`
	// The history phase adds ReleasedRecords Released bindings of deleted
	// servers to the namespace and counts the reconcile requests again.
	ReleasedRecords                               int            `json:"releasedRecords"`
	RequestsPerSteadyReconcileWithReleasedRecords float64        `json:"requestsPerSteadyReconcileWithReleasedRecords"`
	RequestsWithReleasedRecordsByResource         map[string]int `json:"requestsWithReleasedRecordsByResource"`
	ReleasedRecordsCostNothing                    bool           `json:"releasedRecordsCostNothing"`
	// Watch resyncs touch an annotation on every server's StatefulSet,
	// which wakes the controller through its Owns watch and asks for no
	// acknowledgement. WatchResyncReconciles is the growth of the
	// EmbeddingServer controller's controller_runtime_reconcile_total.
	WatchResyncRequestsPerServer float64        `json:"watchResyncRequestsPerServer"`
	WatchResyncWritesPerServer   float64        `json:"watchResyncWritesPerServer"`
	WatchResyncWritesByResource  map[string]int `json:"watchResyncWritesByResource"`
	WatchResyncReconciles        int            `json:"watchResyncReconciles"`

	// Reconciles and the quantiles (seconds) are the EmbeddingServer
	// controller's, from its start until convergence, interpolated within
	// histogram buckets.
	Reconciles   int     `json:"reconciles"`
	ReconcileP50 float64 `json:"reconcileP50"`
	ReconcileP99 float64 `json:"reconcileP99"`

	// RestSeconds is each rest window; CPU at rest is the CPU seconds the
	// controller used in a window, scaled to one minute.
	RestSeconds                                 float64 `json:"restSeconds"`
	ControllerCPUSecondsAtRest                  float64 `json:"controllerCPUSecondsAtRest"`
	ControllerCPUSecondsAtRestWithUnrelatedPods float64 `json:"controllerCPUSecondsAtRestWithUnrelatedPods"`
	// ControllerCPUSecondsPerScrape is the CPU time of one full scrape of
	// the controller's metrics after the rest window: a Prometheus that
	// scrapes every 30 s adds twice this per minute.
	ControllerCPUSecondsPerScrape float64 `json:"controllerCPUSecondsPerScrape"`
	// Rest writes add up the controller's writes in both rest windows,
	// each from its start until its heap sampling ended.
	RestWritesPerServer  float64        `json:"restWritesPerServer"`
	RestWritesByResource map[string]int `json:"restWritesByResource"`

	// Heap is go_memstats_heap_inuse_bytes (see Rest.HeapBytes); live heap
	// is go_gc_heap_live_bytes; RSS is VmRSS.
	ControllerHeapBytes                      int64 `json:"controllerHeapBytes"`
	ControllerLiveHeapBytes                  int64 `json:"controllerLiveHeapBytes"`
	ControllerRSSBytes                       int64 `json:"controllerRSSBytes"`
	ControllerHeapBytesWithUnrelatedPods     int64 `json:"controllerHeapBytesWithUnrelatedPods"`
	ControllerLiveHeapBytesWithUnrelatedPods int64 `json:"controllerLiveHeapBytesWithUnrelatedPods"`
	ControllerRSSBytesWithUnrelatedPods      int64 `json:"controllerRSSBytesWithUnrelatedPods"`
	// Relative differences are (with - without) / without; the heap's is
	// the live heap's, which does not depend on when it is sampled.
	HeapRelativeDifference float64 `json:"heapRelativeDifference"`
	HeapWithin10Percent    bool    `json:"heapWithin10Percent"`
	RSSRelativeDifference  float64 `json:"rssRelativeDifference"`
	RSSWithin10Percent     bool    `json:"rssWithin10Percent"`

	// ControllerArgs are the controller's flags beyond the harness'.
	ControllerArgs []string `json:"controllerArgs"`
	// Phases are the wall times of the phases, in order.
	Phases []PhaseTime `json:"phases"`
}

// PhaseTime is the wall time of one phase.
type PhaseTime struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
}

func newScaleReport(opts ScaleOptions) *ScaleReport {
	return &ScaleReport{
		Servers: opts.Servers, UnrelatedPods: opts.UnrelatedPods, UnrelatedConfigMaps: opts.UnrelatedPods, UnrelatedSecrets: opts.UnrelatedPods,
		Nodes: opts.Nodes(), ProvisionDelaySeconds: opts.ProvisionDelay.Seconds(),
		Resyncs: opts.Resyncs, RestSeconds: opts.Rest.Seconds(),
		ControllerArgs: append([]string{}, opts.ControllerArgs...),
	}
}

// perServer divides n by the number of servers.
func (r *ScaleReport) perServer(n int) float64 {
	return round(float64(n) / float64(r.Servers))
}

func (r *ScaleReport) setConvergence(wallSeconds, cpuSeconds float64) {
	r.ConvergeSeconds = round(wallSeconds)
	r.ServersPerSecond = round(float64(r.Servers) / wallSeconds)
	r.ControllerCPUShareOfConvergence = round(cpuSeconds / wallSeconds)
}

func (r *ScaleReport) setLimiter(waited, sent float64) {
	r.LimiterWaitSeconds, r.LimiterShareOfRequestTime = round(waited), limiterShare(waited, sent)
}

// limiterShare is the share of request time spent waiting for the client's
// rate limiter: waited / (waited + sent), 0 without either.
func limiterShare(waited, sent float64) float64 {
	if waited+sent <= 0 {
		return 0
	}
	return round(waited / (waited + sent))
}

func (r *ScaleReport) setCreation(counts Counts) {
	r.RequestsPerServerCreate = r.perServer(Total(counts.Requests))
	r.WritesPerServerCreate = r.perServer(Total(counts.Writes))
	r.CreateWritesByResource = counts.Writes
	r.CreateByCause = counts.Causes
}

func (r *ScaleReport) setSteadyState(counts Counts) {
	status := counts.Writes[statusWrites]
	r.SteadyStateRequestsPerServer = r.perServer(Total(counts.Requests))
	r.SteadyStateWritesPerServer = r.perServer(Total(counts.Writes))
	r.SteadyStateStatusWritesPerServer = r.perServer(status)
	r.SteadyStateOtherWritesPerServer = r.perServer(Total(counts.Writes) - status)
	r.SteadyStateWritesByResource = counts.Writes
	r.RequestsPerSteadyReconcile = r.perReconcileRequest(counts)
}

func (r *ScaleReport) setHistory(records int, counts Counts) {
	r.ReleasedRecords = records
	r.RequestsPerSteadyReconcileWithReleasedRecords = r.perReconcileRequest(counts)
	r.RequestsWithReleasedRecordsByResource = counts.Requests
	r.ReleasedRecordsCostNothing = r.RequestsPerSteadyReconcileWithReleasedRecords == r.RequestsPerSteadyReconcile
}

// perReconcileRequest divides the requests by the reconcile requests made.
func (r *ScaleReport) perReconcileRequest(counts Counts) float64 {
	if r.Resyncs == 0 {
		return 0
	}
	return round(float64(Total(counts.Requests)) / float64(r.Servers*r.Resyncs))
}

func (r *ScaleReport) setWatchResync(counts Counts, reconciles int) {
	r.WatchResyncRequestsPerServer = r.perServer(Total(counts.Requests))
	r.WatchResyncWritesPerServer = r.perServer(Total(counts.Writes))
	r.WatchResyncWritesByResource = counts.Writes
	r.WatchResyncReconciles = reconciles
}

func (r *ScaleReport) setRestWrites(writes map[string]int) {
	r.RestWritesPerServer = r.perServer(Total(writes))
	r.RestWritesByResource = writes
}

func (r *ScaleReport) setRest(rest Rest) {
	r.ControllerCPUSecondsAtRest = perMinute(rest)
	r.ControllerCPUSecondsPerScrape = round(rest.ScrapeCPUSeconds)
	r.ControllerHeapBytes, r.ControllerLiveHeapBytes = int64(rest.HeapBytes), int64(rest.LiveHeapBytes)
	r.ControllerRSSBytes = rest.RSSBytes
}

func (r *ScaleReport) setRestWithUnrelated(rest Rest) {
	r.ControllerCPUSecondsAtRestWithUnrelatedPods = perMinute(rest)
	r.ControllerHeapBytesWithUnrelatedPods, r.ControllerLiveHeapBytesWithUnrelatedPods = int64(rest.HeapBytes), int64(rest.LiveHeapBytes)
	r.ControllerRSSBytesWithUnrelatedPods = rest.RSSBytes
	r.HeapRelativeDifference, r.HeapWithin10Percent = compare(r.ControllerLiveHeapBytes, r.ControllerLiveHeapBytesWithUnrelatedPods)
	r.RSSRelativeDifference, r.RSSWithin10Percent = compare(r.ControllerRSSBytes, r.ControllerRSSBytesWithUnrelatedPods)
}

// perMinute is the CPU seconds a rest window used, per minute.
func perMinute(rest Rest) float64 {
	return round(rest.CPUSeconds / rest.Seconds * time.Minute.Seconds())
}

// compare returns (with - without) / without and whether it is within
// withinTolerance either way.
func compare(without, with int64) (float64, bool) {
	diff := float64(with-without) / float64(without)
	return round(diff), math.Abs(diff) <= withinTolerance
}
