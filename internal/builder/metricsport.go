package builder

// TEI's Prometheus listener (TEI router/src/prometheus.rs, started by
// router/src/lib.rs on --prometheus-port, env PROMETHEUS_PORT, default 9000).
const (
	// MetricsPort is the port TEI serves /metrics on besides the HTTP port.
	MetricsPort int32 = 9000
	// MetricsPortName names TEI's metrics port.
	MetricsPortName = "metrics"
)
