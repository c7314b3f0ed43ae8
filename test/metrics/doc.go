// Package metrics tests the controller's metrics endpoint as deployed: the
// controller runs as its own process on an envtest control plane, as the
// ServiceAccount config/rbac grants its roles to, with its default secure
// metrics. A scrape without a token is refused (401), one with a token not
// allowed to get /metrics is forbidden (403), and one with a token bound to
// config/rbac's metrics-reader ClusterRole reads the metrics.
package metrics
