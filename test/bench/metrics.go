package bench

import (
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
)

// Metrics the benchmark reads from the controller.
const (
	// heapMetric is the bytes of heap spans holding at least one object.
	heapMetric = "go_memstats_heap_inuse_bytes"
	// liveHeapMetric is the heap the last GC found live.
	liveHeapMetric = "go_gc_heap_live_bytes"
	// gcCyclesMetric counts completed GC cycles.
	gcCyclesMetric = "go_gc_cycles_total_gc_cycles_total"
	// reconcileTimeMetric is controller-runtime's reconcile duration histogram.
	reconcileTimeMetric = "controller_runtime_reconcile_time_seconds"
	// limiterWaitMetric is how long client-go's rate limiter held each
	// request back.
	limiterWaitMetric = "rest_client_rate_limiter_duration_seconds"
	// requestTimeMetric is how long each request took once sent.
	requestTimeMetric = "rest_client_request_duration_seconds"
	// serverController is the EmbeddingServer controller's label value.
	serverController = "embeddingserver"
)

// value reads the value of a gauge, counter or untyped metric without labels.
func value(families map[string]*dto.MetricFamily, name string) (float64, error) {
	family, ok := families[name]
	if !ok || len(family.GetMetric()) == 0 {
		return 0, fmt.Errorf("the controller exposes no %s", name)
	}
	metric := family.GetMetric()[0]
	switch {
	case metric.GetGauge() != nil:
		return metric.GetGauge().GetValue(), nil
	case metric.GetCounter() != nil:
		return metric.GetCounter().GetValue(), nil
	case metric.GetUntyped() != nil:
		return metric.GetUntyped().GetValue(), nil
	}
	return 0, fmt.Errorf("%s is not a gauge, counter or untyped metric", name)
}

// histogram finds the histogram of name whose label has labelValue.
func histogram(families map[string]*dto.MetricFamily, name, label, labelValue string) (*dto.Histogram, error) {
	for _, metric := range labelled(families, name, label, labelValue) {
		if metric.GetHistogram() != nil {
			return metric.GetHistogram(), nil
		}
	}
	return nil, fmt.Errorf("the controller exposes no %s{%s=%q}", name, label, labelValue)
}

// counterSum adds up the counters of name whose label has labelValue,
// whatever their other labels.
func counterSum(families map[string]*dto.MetricFamily, name, label, labelValue string) (float64, error) {
	sum, found := 0.0, false
	for _, metric := range labelled(families, name, label, labelValue) {
		if metric.GetCounter() != nil {
			sum, found = sum+metric.GetCounter().GetValue(), true
		}
	}
	if !found {
		return 0, fmt.Errorf("the controller exposes no %s{%s=%q}", name, label, labelValue)
	}
	return sum, nil
}

// histogramSum adds up the sums of every histogram of name, whatever its
// labels; 0 when there is none.
func histogramSum(families map[string]*dto.MetricFamily, name string) float64 {
	sum := 0.0
	for _, metric := range families[name].GetMetric() {
		sum += metric.GetHistogram().GetSampleSum()
	}
	return sum
}

// labelled finds the metrics of name whose label has labelValue.
func labelled(families map[string]*dto.MetricFamily, name, label, labelValue string) []*dto.Metric {
	var found []*dto.Metric
	for _, metric := range families[name].GetMetric() {
		for _, pair := range metric.GetLabel() {
			if pair.GetName() == label && pair.GetValue() == labelValue {
				found = append(found, metric)
			}
		}
	}
	return found
}

// Quantile estimates the q-quantile of a classic histogram as Prometheus'
// histogram_quantile does: it finds the bucket holding the q*count-th
// observation and interpolates linearly between the bucket's bounds (the
// first bucket's lower bound is 0). An estimate in the +Inf bucket is the
// highest finite bound. NaN when the histogram is empty.
func Quantile(h *dto.Histogram, q float64) float64 {
	count := float64(h.GetSampleCount())
	if count == 0 {
		return math.NaN()
	}
	rank := q * count
	lower, below := 0.0, 0.0
	for _, bucket := range h.GetBucket() {
		upper, cumulative := bucket.GetUpperBound(), float64(bucket.GetCumulativeCount())
		if cumulative >= rank && !math.IsInf(upper, 1) {
			if cumulative == below {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/(cumulative-below)
		}
		if math.IsInf(upper, 1) {
			break
		}
		lower, below = upper, cumulative
	}
	return lower
}
