package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// stateListTimeout bounds the cache reads of one scrape.
const stateListTimeout = 5 * time.Second

var (
	// serverConditionDesc is one condition of one server, always 1.
	serverConditionDesc = prometheus.NewDesc("embedops_server_condition",
		"A condition of an EmbeddingServer: 1 for its current type, status and reason.",
		[]string{"namespace", "name", "type", "status", "reason"}, nil)
	// bindingPhaseDesc is the phase of one binding, always 1.
	bindingPhaseDesc = prometheus.NewDesc("embedops_binding_phase",
		"The lifecycle phase of a ModelCacheBinding: 1 for its current phase.",
		[]string{"namespace", "name", "phase"}, nil)
	// bindingBytesDesc is the size of one binding's cached files while its
	// claims hold them: Active or Retiring, never Released.
	bindingBytesDesc = prometheus.NewDesc("embedops_binding_cached_bytes",
		"The bytes of model files a ModelCacheBinding's cache holds (status.realized.bytes), while it is not Released.",
		[]string{"namespace", "name"}, nil)
)

// StateCollector reports the servers' conditions and the bindings' phases
// as the manager's cache holds them, read at scrape time, so no series
// outlives its object. It reads nothing until a manager gives it a reader.
type StateCollector struct {
	reader atomic.Pointer[client.Reader]
}

// state is the process's collector, registered once on controller-runtime's
// registry like the other collectors; NewManager points it at its cache.
var state = &StateCollector{}

// Use makes the collector read from reader.
func (c *StateCollector) Use(reader client.Reader) {
	c.reader.Store(&reader)
}

// Describe sends the descriptors.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- serverConditionDesc
	ch <- bindingPhaseDesc
	ch <- bindingBytesDesc
}

// Collect lists servers and bindings from the cache, without copying them
// (it only reads them), so a scrape costs the series it sends and not a
// copy of every object; a failed list leaves its series out of this
// scrape.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	reader := c.reader.Load()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateListTimeout)
	defer cancel()
	var servers embedopsv1.EmbeddingServerList
	if err := (*reader).List(ctx, &servers, client.UnsafeDisableDeepCopy); err == nil {
		for i := range servers.Items {
			server := &servers.Items[i]
			for _, condition := range server.Status.Conditions {
				ch <- prometheus.MustNewConstMetric(serverConditionDesc, prometheus.GaugeValue, 1,
					server.Namespace, server.Name, condition.Type, string(condition.Status), condition.Reason)
			}
		}
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := (*reader).List(ctx, &bindings, client.UnsafeDisableDeepCopy); err == nil {
		for i := range bindings.Items {
			binding := &bindings.Items[i]
			if binding.Status.Phase != "" {
				ch <- prometheus.MustNewConstMetric(bindingPhaseDesc, prometheus.GaugeValue, 1,
					binding.Namespace, binding.Name, string(binding.Status.Phase))
			}
			if cached := cachedBytes(binding); cached != nil {
				ch <- prometheus.MustNewConstMetric(bindingBytesDesc, prometheus.GaugeValue, float64(*cached),
					binding.Namespace, binding.Name)
			}
		}
	}
}

// cachedBytes is the size of the files a binding's claims hold: its
// realized bytes, unless it is Released (its claims are gone) or nothing
// was recorded.
func cachedBytes(binding *embedopsv1.ModelCacheBinding) *int64 {
	if binding.Status.Phase == embedopsv1.BindingReleased || binding.Status.Realized == nil {
		return nil
	}
	return binding.Status.Realized.Bytes
}
