package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the TEI metrics the stand-in keeps, named as TEI v1.9.3
// names them (router/src/http/server.rs, router/src/lib.rs, core/src/infer.rs
// and core/src/queue.rs; TEI's exporter adds no _total suffix), with the
// buckets router/src/prometheus.rs gives them.
type metrics struct {
	registry        *prometheus.Registry
	requestCount    *prometheus.CounterVec
	requestSuccess  *prometheus.CounterVec
	requestFailure  *prometheus.CounterVec
	embedCount      prometheus.Counter
	embedSuccess    prometheus.Counter
	requestDuration prometheus.Histogram
	// queueDuration and inferenceDuration split requestDuration as
	// router/src/lib.rs ResponseMetadata does; the stand-in queues a
	// request until its handler runs and infers in one step.
	queueDuration     prometheus.Histogram
	inferenceDuration prometheus.Histogram
	// queueSize is te_queue_size (core/src/queue.rs): requests waiting for
	// a batch, here the requests received and not yet embedded.
	queueSize prometheus.Gauge
	// batchSize is te_batch_next_size: the inputs of each batch.
	batchSize prometheus.Histogram
}

// durationBuckets are TEI's buckets for every metric named *duration
// (router/src/prometheus.rs): 35 steps of x1.5 from 1.5e-5 seconds.
func durationBuckets() []float64 {
	return prometheus.ExponentialBuckets(0.00001*1.5, 1.5, 35)
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requestCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "te_request_count", Help: "Embedding requests received, by method (single or batch).",
		}, []string{"method"}),
		requestSuccess: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "te_request_success", Help: "Embedding requests answered, by method.",
		}, []string{"method"}),
		requestFailure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "te_request_failure", Help: "Embedding requests refused, by error type.",
		}, []string{"err"}),
		embedCount:   prometheus.NewCounter(prometheus.CounterOpts{Name: "te_embed_count", Help: "Inputs embedded or refused."}),
		embedSuccess: prometheus.NewCounter(prometheus.CounterOpts{Name: "te_embed_success", Help: "Inputs embedded."}),
		requestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "te_request_duration", Help: "Time to answer an embedding request, in seconds.", Buckets: durationBuckets(),
		}),
		queueDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "te_request_queue_duration", Help: "Time a request waited before inference, in seconds.", Buckets: durationBuckets(),
		}),
		inferenceDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "te_request_inference_duration", Help: "Time a request's inference took, in seconds.", Buckets: durationBuckets(),
		}),
		queueSize: prometheus.NewGauge(prometheus.GaugeOpts{Name: "te_queue_size", Help: "Requests waiting for a batch."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "te_batch_next_size", Help: "Inputs in each batch.", Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
	}
	m.registry.MustRegister(m.requestCount, m.requestSuccess, m.requestFailure, m.embedCount, m.embedSuccess,
		m.requestDuration, m.queueDuration, m.inferenceDuration, m.queueSize, m.batchSize)
	return m
}

// handler serves the metrics in Prometheus' text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
