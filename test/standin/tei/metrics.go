package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the TEI metrics the stand-in keeps, named as TEI names them
// (router/src/http/server.rs and core/src/infer.rs; TEI's exporter adds no
// _total suffix), with the size of the model it serves.
type metrics struct {
	registry        *prometheus.Registry
	requestCount    *prometheus.CounterVec
	requestSuccess  *prometheus.CounterVec
	requestFailure  *prometheus.CounterVec
	embedCount      prometheus.Counter
	embedSuccess    prometheus.Counter
	requestDuration prometheus.Histogram
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
			Name: "te_request_duration", Help: "Time to answer an embedding request, in seconds.",
		}),
	}
	m.registry.MustRegister(m.requestCount, m.requestSuccess, m.requestFailure, m.embedCount, m.embedSuccess, m.requestDuration)
	return m
}

// handler serves the metrics in Prometheus' text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
