package bench

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Rest window sampling.
const (
	// heapSampleInterval is how often the heap is read during a rest.
	heapSampleInterval = 2 * time.Second
	// gcWaitLimit bounds sampling after the window while waiting for a GC
	// cycle; Go's runtime forces one at least every two minutes.
	gcWaitLimit = 150 * time.Second
)

// scrapesPerMeasurement is how many full scrapes measure the CPU cost of
// one.
const scrapesPerMeasurement = 5

// heapMetrics are the families the heap sampling reads.
var heapMetrics = []string{heapMetric, liveHeapMetric, gcCyclesMetric}

// Rest is the controller measured while nothing asks anything of it.
type Rest struct {
	// Seconds is the length of the window.
	Seconds float64
	// CPUSeconds is the CPU time the controller used in the window, in
	// which nothing, the benchmark included, asked it anything.
	CPUSeconds float64
	// ScrapeCPUSeconds is the CPU time one full scrape of /metrics costs
	// the controller after the window, as a Prometheus scrape would: it
	// grows with the servers, each of which has series.
	ScrapeCPUSeconds float64
	// HeapBytes is the least go_memstats_heap_inuse_bytes sampled from the
	// window's end until a GC cycle had completed after it: the in-use heap
	// nearest to the live heap without forcing a collection.
	HeapBytes float64
	// LiveHeapBytes is go_gc_heap_live_bytes when sampling ended: what
	// that GC cycle marked live.
	LiveHeapBytes float64
	// RSSBytes is the resident set size when sampling ended.
	RSSBytes int64
}

// MeasureRest measures the controller over a rest window: its CPU time
// between a timer's start and end, with nothing scraped meanwhile (a
// scrape every heapSampleInterval would cost more than the rest of the
// controller); then its heap, sampled on a ticker until a GC cycle has
// completed after the window; then the CPU time of a full scrape.
func (e *Env) MeasureRest(ctx context.Context, window time.Duration) (Rest, error) {
	startCPU, err := e.Controller.CPUSeconds()
	if err != nil {
		return Rest{}, err
	}
	rest := Rest{Seconds: window.Seconds(), HeapBytes: math.Inf(1)}
	// The window is a measurement, not a wait for state.
	select {
	case <-ctx.Done():
		return Rest{}, ctx.Err()
	case <-time.After(window):
	}
	endCPU, err := e.Controller.CPUSeconds()
	if err != nil {
		return Rest{}, err
	}
	rest.CPUSeconds = endCPU - startCPU
	endGC, err := e.metric(ctx, gcCyclesMetric)
	if err != nil {
		return Rest{}, err
	}
	if err := e.sampleHeapUntilGC(ctx, &rest, endGC); err != nil {
		return Rest{}, err
	}
	if rest.ScrapeCPUSeconds, err = e.scrapeCPUSeconds(ctx); err != nil {
		return Rest{}, err
	}
	return rest, nil
}

// sampleHeapUntilGC samples the heap every heapSampleInterval until a GC
// cycle has completed since startGC was read; the runtime forces one at
// least every two minutes.
func (e *Env) sampleHeapUntilGC(ctx context.Context, rest *Rest, startGC float64) error {
	ticker := time.NewTicker(heapSampleInterval)
	defer ticker.Stop()
	timeout := time.After(gcWaitLimit)
	for {
		gcSeen, err := e.sampleHeap(ctx, rest, startGC)
		if err != nil || gcSeen {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return fmt.Errorf("no GC cycle in the controller within %s of the rest window's end", gcWaitLimit)
		case <-ticker.C:
		}
	}
}

// scrapeCPUSeconds is the controller's CPU time per full scrape of its
// metrics, over scrapesPerMeasurement scrapes one after another.
func (e *Env) scrapeCPUSeconds(ctx context.Context) (float64, error) {
	start, err := e.Controller.CPUSeconds()
	if err != nil {
		return 0, err
	}
	for range scrapesPerMeasurement {
		if _, err := e.Controller.Metrics(ctx); err != nil {
			return 0, err
		}
	}
	end, err := e.Controller.CPUSeconds()
	if err != nil {
		return 0, err
	}
	return (end - start) / scrapesPerMeasurement, nil
}

// sampleHeap lowers rest.HeapBytes to the current in-use heap, records
// the live heap and the RSS, and reports whether a GC cycle has completed
// since startGC.
func (e *Env) sampleHeap(ctx context.Context, rest *Rest, startGC float64) (bool, error) {
	families, err := e.Controller.Metrics(ctx, heapMetrics...)
	if err != nil {
		return false, err
	}
	readings := map[string]float64{}
	for _, name := range heapMetrics {
		if readings[name], err = value(families, name); err != nil {
			return false, err
		}
	}
	rest.HeapBytes = min(rest.HeapBytes, readings[heapMetric])
	rest.LiveHeapBytes = readings[liveHeapMetric]
	if rest.RSSBytes, err = e.Controller.RSSBytes(); err != nil {
		return false, err
	}
	return readings[gcCyclesMetric] > startGC, nil
}

// metric scrapes the controller for one metric without labels.
func (e *Env) metric(ctx context.Context, name string) (float64, error) {
	families, err := e.Controller.Metrics(ctx, name)
	if err != nil {
		return 0, err
	}
	return value(families, name)
}
