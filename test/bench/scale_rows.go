package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Rows lays the report out as a table.
func (r *ScaleReport) Rows() []Row {
	rows := r.measurements()
	rows = append(rows, r.causeRows()...)
	rows = append(rows, Row{"controllerArgs", fmt.Sprint(r.ControllerArgs), "beyond the harness' (kubeconfig, metrics, health)"})
	for _, phase := range r.Phases {
		rows = append(rows, Row{"phase " + phase.Phase, seconds(phase.Seconds), "wall time"})
	}
	return rows
}

// measurements are the rows of the measured figures.
func (r *ScaleReport) measurements() []Row {
	return []Row{
		{"servers", fmt.Sprint(r.Servers), fmt.Sprintf("on %d kwok nodes; claims bind %gs after they are seen (provisioner delay)", r.Nodes, r.ProvisionDelaySeconds)},
		{"convergeSeconds", seconds(r.ConvergeSeconds), "first create to all Ready and bound (binding Active)"},
		{"serversPerSecond", fmt.Sprint(r.ServersPerSecond), ""},
		{"controllerCPUShareOfConvergence", fmt.Sprint(r.ControllerCPUShareOfConvergence), "controller CPU s / wall s (1 = one core)"},
		{"limiterShareOfRequestTime", fmt.Sprint(r.LimiterShareOfRequestTime), fmt.Sprintf("client rate limiter wait / (wait + request time) in convergence; %s waited in all", seconds(r.LimiterWaitSeconds))},
		{"requestsPerServerCreate", fmt.Sprint(r.RequestsPerServerCreate), "audit log, controller's user agent; dry runs are requests, goal 13"},
		{"writesPerServerCreate", fmt.Sprint(r.WritesPerServerCreate), fmt.Sprintf("successful, not dry runs, goal 9 (the first reconcile writes the status): %v", r.CreateWritesByResource)},
		{"steadyStateRequestsPerServer", fmt.Sprint(r.SteadyStateRequestsPerServer), fmt.Sprintf("across %d reconcile requests (reconcile.fluxcd.io/requestedAt)", r.Resyncs)},
		{"steadyStateWritesPerServer", fmt.Sprint(r.SteadyStateWritesPerServer), fmt.Sprintf("one acknowledged status write per reconcile request, by design: %v", r.SteadyStateWritesByResource)},
		{"  statusWrites", fmt.Sprint(r.SteadyStateStatusWritesPerServer), "status.lastHandledReconcileAt acknowledgements"},
		{"  otherWrites", fmt.Sprint(r.SteadyStateOtherWritesPerServer), "children, bindings, events: target 0"},
		{"requestsPerSteadyReconcile", fmt.Sprint(r.RequestsPerSteadyReconcile), "per reconcile request, its acknowledgement included; goal at most 2"},
		{"requestsPerSteadyReconcileWithReleasedRecords", fmt.Sprint(r.RequestsPerSteadyReconcileWithReleasedRecords), fmt.Sprintf("with %d Released records in the namespace; %s: %v", r.ReleasedRecords, equalTo(r.ReleasedRecordsCostNothing), r.RequestsWithReleasedRecordsByResource)},
		{"watchResyncRequestsPerServer", fmt.Sprint(r.WatchResyncRequestsPerServer), fmt.Sprintf("across %d StatefulSet annotation touches (Owns watch)", r.Resyncs)},
		{"watchResyncWritesPerServer", fmt.Sprint(r.WatchResyncWritesPerServer), fmt.Sprintf("target 0: %v", r.WatchResyncWritesByResource)},
		{"watchResyncReconciles", fmt.Sprint(r.WatchResyncReconciles), fmt.Sprintf("reconcile_total growth; at least %d", r.Resyncs*r.Servers)},
		{"reconcileP50", seconds(r.ReconcileP50), fmt.Sprintf("%d EmbeddingServer reconciles to convergence; interpolated in buckets", r.Reconciles)},
		{"reconcileP99", seconds(r.ReconcileP99), "controller_runtime_reconcile_time_seconds"},
		{"controllerCPUSecondsAtRest", fmt.Sprint(r.ControllerCPUSecondsAtRest), fmt.Sprintf("CPU s per minute over a %s rest, nothing scraped in it; goal 0.5", seconds(r.RestSeconds))},
		{"controllerCPUSecondsPerScrape", fmt.Sprint(r.ControllerCPUSecondsPerScrape), "one full /metrics scrape after the rest; a 30s scrape interval adds 2x this per minute"},
		{"controllerHeapBytes", byteSize(r.ControllerHeapBytes), "least heap_inuse in the rest, after a GC; live " + byteSize(r.ControllerLiveHeapBytes)},
		{"controllerRSSBytes", byteSize(r.ControllerRSSBytes), "VmRSS after the rest"},
		{"controllerHeapBytesWithUnrelatedPods", byteSize(r.ControllerHeapBytesWithUnrelatedPods), fmt.Sprintf("%d pods + %d ConfigMaps + %d Secrets; live %s", r.UnrelatedPods, r.UnrelatedConfigMaps, r.UnrelatedSecrets, byteSize(r.ControllerLiveHeapBytesWithUnrelatedPods))},
		{"controllerRSSBytesWithUnrelatedPods", byteSize(r.ControllerRSSBytesWithUnrelatedPods), ""},
		{"heapRelativeDifference", percent(r.HeapRelativeDifference), within(r.HeapWithin10Percent) + ", live heap"},
		{"rssRelativeDifference", percent(r.RSSRelativeDifference), within(r.RSSWithin10Percent)},
		{"controllerCPUSecondsAtRestWithUnrelatedPods", fmt.Sprint(r.ControllerCPUSecondsAtRestWithUnrelatedPods), "CPU s per minute"},
		{"restWritesPerServer", fmt.Sprint(r.RestWritesPerServer), fmt.Sprintf("both rest windows, target 0: %v", r.RestWritesByResource)},
	}
}

// causeRows break the creation requests per server down by cause, the
// most frequent first.
func (r *ScaleReport) causeRows() []Row {
	return causeRows("create: ", "server", r.CreateByCause, r.perServer)
}

// causeRows lay out requests by cause, the most frequent first, each row's
// metric prefix and its cause, its value the requests divided by per, and
// its note the stored writes so divided, per unit.
func causeRows(prefix, unit string, byCause map[string]CauseCount, per func(int) float64) []Row {
	causes := slices.SortedFunc(maps.Keys(byCause), func(a, b string) int {
		return cmp.Or(cmp.Compare(byCause[b].Requests, byCause[a].Requests), strings.Compare(a, b))
	})
	rows := make([]Row, 0, len(causes))
	for _, cause := range causes {
		count := byCause[cause]
		rows = append(rows, Row{prefix + cause, fmt.Sprint(per(count.Requests)), fmt.Sprintf("requests per %s; stored writes %v", unit, per(count.Writes))})
	}
	return rows
}

func seconds(s float64) string { return fmt.Sprintf("%.3fs", s) }

func byteSize(n int64) string { return fmt.Sprintf("%d (%.1f MiB)", n, float64(n)/(1<<20)) }

func percent(x float64) string { return fmt.Sprintf("%+.1f%%", 100*x) }

func equalTo(equal bool) string {
	if equal {
		return "equal to none"
	}
	return "NOT equal to none"
}

func within(ok bool) string {
	if ok {
		return "within 10%"
	}
	return "NOT within 10%"
}
