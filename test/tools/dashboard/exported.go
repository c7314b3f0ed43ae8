package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	embedopsmetrics "github.com/embedops/embedops/internal/controller/metrics"
)

// metricType is the type of an exported metric family.
type metricType int

// The metric types a dashboard query can read.
const (
	untyped metricType = iota
	counter
	gauge
	histogram
)

// Exported is the set of metric families one program serves.
type Exported map[string]metricType

// Has reports whether series, a name as a query selects it, is served:
// a family's own name, or a histogram's _bucket, _sum or _count. A family
// whose type is unknown (untyped) may be a histogram.
func (e Exported) Has(series string) bool {
	if _, ok := e[series]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok {
			if t, ok := e[base]; ok && (t == histogram || t == untyped) {
				return true
			}
		}
	}
	return false
}

// fqName reads a descriptor's name from its String form, the only place
// client_golang shows it.
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// ControllerMetrics returns the metrics the controller serves: those of
// the collectors internal/controller registers (described, since their
// series exist only once objects are reconciled) and those
// controller-runtime registers, gathered from its registry after a
// controller has reconciled one request.
func ControllerMetrics(ctx context.Context) (Exported, error) {
	exported := Exported{}
	descs := make(chan *prometheus.Desc, 64)
	go func() {
		for _, collector := range embedopsmetrics.Collectors() {
			collector.Describe(descs)
		}
		close(descs)
	}()
	for desc := range descs {
		match := fqName.FindStringSubmatch(desc.String())
		if match == nil {
			return nil, fmt.Errorf("no metric name in the descriptor %s", desc)
		}
		exported[match[1]] = untyped
	}
	families, err := reconcileOnce(ctx)
	if err != nil {
		return nil, err
	}
	for _, family := range families {
		exported[family.GetName()] = typeOf(family.GetType())
	}
	return exported, nil
}

// reconcileOnce runs an unmanaged controller-runtime controller named as
// embedops' server controller until it has reconciled one request, so
// that controller-runtime's reconcile, work queue and worker series exist,
// and gathers its registry.
func reconcileOnce(ctx context.Context) ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	c, err := controller.NewUnmanaged("embeddingserver", controller.Options{
		SkipNameValidation: new(true),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			close(done)
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("creating a controller: %w", err)
	}
	enqueue := source.Func(func(_ context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		queue.Add(reconcile.Request{})
		return nil
	})
	if err := c.Watch(enqueue); err != nil {
		return nil, fmt.Errorf("watching: %w", err)
	}
	started := make(chan error, 1)
	go func() { started <- c.Start(ctx) }()
	select {
	case <-done:
	case err := <-started:
		return nil, fmt.Errorf("the controller ended before it reconciled: %w", err)
	case <-ctx.Done():
		return nil, fmt.Errorf("the controller reconciled nothing: %w", ctx.Err())
	}
	// The reconcile's duration is observed after it returns; gather once
	// the histogram shows it.
	for {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			return nil, fmt.Errorf("gathering controller-runtime's registry: %w", err)
		}
		for _, family := range families {
			if family.GetName() == "controller_runtime_reconcile_time_seconds" {
				cancel()
				if err := <-started; err != nil {
					return nil, fmt.Errorf("stopping the controller: %w", err)
				}
				return families, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no reconcile duration was recorded: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func typeOf(t dto.MetricType) metricType {
	switch t {
	case dto.MetricType_COUNTER:
		return counter
	case dto.MetricType_GAUGE:
		return gauge
	case dto.MetricType_HISTOGRAM:
		return histogram
	default:
		return untyped
	}
}
