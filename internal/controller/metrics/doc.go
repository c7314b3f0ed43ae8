// Package metrics holds the Prometheus collectors the controller serves on
// controller-runtime's registry: phase durations, reconcile failures, the
// GitOps Toolkit gotk_* gauges, and the servers' conditions and bindings'
// phases read from the cache at scrape time.
//
// It owns metric names and labels. It must not write to the API server, and
// it reads only the cache a manager hands it.
package metrics
