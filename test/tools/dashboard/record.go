package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// target is one endpoint the recorder scrapes, with the labels Prometheus
// would add to its series (the PodMonitor's namespace and embeddingserver).
type target struct {
	url    string
	labels map[string]string
	// last are the series of the previous scrape, by their labels' string.
	last map[string]labels.Labels
}

// scrape reads t's metrics in the text format and appends every sample to
// app at ts, then a staleness marker for each series of the previous scrape
// that is gone, as a Prometheus scrape does: a binding's phase that
// changed ends its old series at once.
func scrape(ctx context.Context, app storage.Appender, t *target, ts time.Time) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", t.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scraping %s: %s", t.url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", t.url, err)
	}
	series, err := appendText(app, body, t.labels, ts)
	if err != nil {
		return 0, err
	}
	current := make(map[string]labels.Labels, len(series))
	for _, ls := range series {
		current[ls.String()] = ls
	}
	for key, ls := range t.last {
		if _, ok := current[key]; !ok {
			if _, err := app.Append(0, ls, ts.UnixMilli(), math.Float64frombits(value.StaleNaN)); err != nil {
				return 0, fmt.Errorf("marking %s stale: %w", ls, err)
			}
		}
	}
	t.last = current
	return len(series), nil
}

// appendText appends the samples of a text exposition to app at ts, with
// extra labels added, and returns their series.
func appendText(app storage.Appender, body []byte, extra map[string]string, ts time.Time) ([]labels.Labels, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	var series []labels.Labels
	for _, family := range families {
		vector, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.TimeFromUnixNano(ts.UnixNano())}, family)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", family.GetName(), err)
		}
		for _, sample := range vector {
			builder := labels.NewScratchBuilder(len(sample.Metric) + len(extra))
			for name, value := range sample.Metric {
				builder.Add(string(name), string(value))
			}
			for name, value := range extra {
				if _, ok := sample.Metric[model.LabelName(name)]; !ok {
					builder.Add(name, value)
				}
			}
			builder.Sort()
			ls := builder.Labels()
			if _, err := app.Append(0, ls, int64(sample.Timestamp), float64(sample.Value)); err != nil {
				return nil, fmt.Errorf("storing %s: %w", family.GetName(), err)
			}
			series = append(series, ls)
		}
	}
	return series, nil
}
