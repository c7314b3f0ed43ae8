package metrics

import (
	"time"

	fluxmetrics "github.com/fluxcd/pkg/runtime/metrics"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Prometheus collectors, registered once per process on controller-runtime's
// registry, which the manager serves. They are process-wide like the
// registry itself, so several managers (as in the tests) share them.
var (
	// phaseDuration is how long each reconcile phase takes.
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "embedops_reconcile_phase_duration_seconds",
		Help:    "Duration of one phase of an EmbeddingServer reconcile.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"phase"})

	// reconcileFailures counts reconciles that ended in an error, by the
	// reason of the condition they set.
	reconcileFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "embedops_reconcile_failures_total",
		Help: "EmbeddingServer reconciles that ended in an error, by condition reason.",
	}, []string{"reason"})

	// Readiness records the GitOps Toolkit condition, suspend and duration
	// gauges (gotk_reconcile_condition and friends).
	Readiness = fluxmetrics.NewRecorder()
)

func init() {
	ctrlmetrics.Registry.MustRegister(Collectors()...)
	// How long client-go's rate limiter (--kube-api-qps, --kube-api-burst)
	// held requests back, beside how long the requests took: opt-in in
	// controller-runtime, a few series per verb whatever the servers.
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRateLimiterLatency, ctrlmetrics.MetricRequestLatency)
}

// Collectors returns every collector this package registers on
// controller-runtime's registry, so that tools can list the metrics the
// controller serves from the collectors themselves (test/tools/dashboard).
func Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{phaseDuration, reconcileFailures, state}, Readiness.Collectors()...)
}

// ObservePhase records the duration of a phase that started at start.
func ObservePhase(phase string, start time.Time) {
	phaseDuration.WithLabelValues(phase).Observe(time.Since(start).Seconds())
}

// CountFailure counts a reconcile that ended in an error, by the reason of
// the Ready condition it set.
func CountFailure(reason string) {
	reconcileFailures.WithLabelValues(reason).Inc()
}

// UseReader points the process's state collector at reader, a manager's
// cache.
func UseReader(reader client.Reader) {
	state.Use(reader)
}
