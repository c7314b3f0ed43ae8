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
	// gcWaitLimit bounds sampling past the window while waiting for a GC
	// cycle; Go's runtime forces one at least every two minutes.
	gcWaitLimit = 150 * time.Second
)

// Rest is the controller measured while nothing asks anything of it.
type Rest struct {
	// Seconds is the length of the window.
	Seconds float64
	// CPUSeconds is the CPU time the controller used in the window.
	CPUSeconds float64
	// HeapBytes is the least go_memstats_heap_inuse_bytes sampled from the
	// window's start until a GC cycle had completed in it: the in-use heap
	// nearest to the live heap without forcing a collection.
	HeapBytes float64
	// LiveHeapBytes is go_gc_heap_live_bytes when sampling ended: what
	// that GC cycle marked live.
	LiveHeapBytes float64
	// RSSBytes is the resident set size when sampling ended.
	RSSBytes int64
}

// MeasureRest measures the controller over a rest window: its CPU time
// between a timer's start and end, and its heap sampled on a ticker until
// the window has passed and a GC cycle has completed since it began.
func (e *Env) MeasureRest(ctx context.Context, window time.Duration) (Rest, error) {
	startCPU, err := e.Controller.CPUSeconds()
	if err != nil {
		return Rest{}, err
	}
	startGC, err := e.metric(ctx, gcCyclesMetric)
	if err != nil {
		return Rest{}, err
	}
	rest := Rest{Seconds: window.Seconds(), HeapBytes: math.Inf(1)}
	started := time.Now()
	// The window is a measurement, not a wait for state: a timer ends it
	// while a ticker samples the heap.
	timer := time.NewTimer(window)
	defer timer.Stop()
	ticker := time.NewTicker(heapSampleInterval)
	defer ticker.Stop()
	for open, gcSeen := true, false; open || !gcSeen; {
		select {
		case <-ctx.Done():
			return Rest{}, ctx.Err()
		case <-timer.C:
			open = false
			endCPU, err := e.Controller.CPUSeconds()
			if err != nil {
				return Rest{}, err
			}
			rest.CPUSeconds = endCPU - startCPU
		case <-ticker.C:
		}
		if gcSeen, err = e.sampleHeap(ctx, &rest, startGC); err != nil {
			return Rest{}, err
		}
		if time.Since(started) > window+gcWaitLimit {
			return Rest{}, fmt.Errorf("no GC cycle in the controller within %s of the rest window's start", window+gcWaitLimit)
		}
	}
	return rest, nil
}

// sampleHeap lowers rest.HeapBytes to the current in-use heap, records
// the live heap and the RSS, and reports whether a GC cycle has completed
// since startGC.
func (e *Env) sampleHeap(ctx context.Context, rest *Rest, startGC float64) (bool, error) {
	families, err := e.Controller.Metrics(ctx)
	if err != nil {
		return false, err
	}
	readings := map[string]float64{}
	for _, name := range []string{heapMetric, liveHeapMetric, gcCyclesMetric} {
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

// metric scrapes the controller and reads one metric without labels.
func (e *Env) metric(ctx context.Context, name string) (float64, error) {
	families, err := e.Controller.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	return value(families, name)
}
