package bench

import (
	"math"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
)

// buckets builds a classic histogram from upper bounds and cumulative counts.
func buckets(bounds []float64, cumulative []uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: new(cumulative[len(cumulative)-1])}
	for i := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: new(bounds[i]), CumulativeCount: new(cumulative[i])})
	}
	return h
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name string
		h    *dto.Histogram
		q    float64
		want float64
	}{
		{name: "interpolates in the first bucket from 0", h: buckets([]float64{0.1, 0.2, inf}, []uint64{10, 20, 20}), q: 0.25, want: 0.05},
		{name: "interpolates in a later bucket", h: buckets([]float64{0.1, 0.2, inf}, []uint64{10, 20, 20}), q: 0.75, want: 0.15},
		{name: "skips empty buckets", h: buckets([]float64{0.1, 0.2, 0.4, inf}, []uint64{0, 0, 4, 4}), q: 0.5, want: 0.3},
		{name: "the +Inf bucket gives the highest finite bound", h: buckets([]float64{0.1, 0.2, inf}, []uint64{1, 2, 100}), q: 0.99, want: 0.2},
		{name: "without a +Inf bucket", h: buckets([]float64{0.1, 0.2}, []uint64{5, 10}), q: 1, want: 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Quantile(tt.h, tt.q)).To(BeNumerically("~", tt.want, 1e-9))
		})
	}
	t.Run("an empty histogram has no quantile", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(math.IsNaN(Quantile(&dto.Histogram{}, 0.5))).To(BeTrue())
	})
}

func TestCounterSum(t *testing.T) {
	g := NewWithT(t)
	counter := func(controller, result string, v float64) *dto.Metric {
		return &dto.Metric{
			Label:   []*dto.LabelPair{{Name: new("controller"), Value: new(controller)}, {Name: new("result"), Value: new(result)}},
			Counter: &dto.Counter{Value: new(v)},
		}
	}
	families := map[string]*dto.MetricFamily{reconcileTotalMetric: {Metric: []*dto.Metric{
		counter(serverController, "success", 7), counter(serverController, "error", 2), counter("modelcachebinding", "success", 100),
	}}}
	sum, err := counterSum(families, reconcileTotalMetric, "controller", serverController)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sum).To(Equal(9.0), "every result of the controller, no other controller")
	_, err = counterSum(families, reconcileTotalMetric, "controller", "absent")
	g.Expect(err).To(HaveOccurred())
}

func TestHistogramSum(t *testing.T) {
	g := NewWithT(t)
	histogram := func(verb string, sum float64) *dto.Metric {
		return &dto.Metric{
			Label:     []*dto.LabelPair{{Name: new("verb"), Value: new(verb)}},
			Histogram: &dto.Histogram{SampleSum: new(sum)},
		}
	}
	families := map[string]*dto.MetricFamily{limiterWaitMetric: {Metric: []*dto.Metric{histogram("GET", 1.5), histogram("PATCH", 2)}}}
	g.Expect(histogramSum(families, limiterWaitMetric)).To(Equal(3.5), "every verb")
	g.Expect(histogramSum(families, requestTimeMetric)).To(BeZero(), "an absent family sums to nothing")
}
