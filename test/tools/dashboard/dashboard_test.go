package main

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// dashboardPath is the dashboard config/grafana ships.
var dashboardPath = filepath.Join("..", "..", "..", "config", "grafana", "embedops.json")

func TestEveryQueryReadsExportedMetrics(t *testing.T) {
	g := NewWithT(t)
	d, err := LoadDashboard(dashboardPath)
	g.Expect(err).NotTo(HaveOccurred())
	controllerMetrics, err := ControllerMetrics(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	tei := Exported(teiMetrics)

	queries := 0
	for _, panel := range d.Panels {
		if panel.Type == "row" {
			continue
		}
		g.Expect(panel.Targets).NotTo(BeEmpty(), "panel %q has no query", panel.Title)
		for _, target := range panel.Targets {
			queries++
			names, err := MetricNames(target.Expr)
			g.Expect(err).NotTo(HaveOccurred(), "panel %q", panel.Title)
			g.Expect(names).NotTo(BeEmpty(), "panel %q: %s reads no metric", panel.Title, target.Expr)
			for _, name := range names {
				g.Expect(controllerMetrics.Has(name) || tei.Has(name)).To(BeTrue(),
					"panel %q reads %s, which neither the controller nor TEI v1.9.3 exports", panel.Title, name)
			}
		}
	}
	g.Expect(queries).To(BeNumerically(">=", 10))
}

func TestMetricNamesFindEverySelector(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    []string
		wantErr string
	}{
		{`sum by (le) (rate(te_request_duration_bucket{namespace=~"$namespace"}[$__rate_interval]))`, []string{"te_request_duration_bucket"}, ""},
		{`a / on (name) group_left b or vector(0)`, []string{"a", "b"}, ""},
		{`{__name__=~"te_.*"}`, nil, "names no metric"},
		{`sum(rate(x[5m])`, nil, "parsing"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			g := NewWithT(t)
			names, err := MetricNames(tc.expr)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names).To(Equal(tc.want))
		})
	}
}

func TestExportedHasHistogramSeriesOnlyOfHistograms(t *testing.T) {
	g := NewWithT(t)
	e := Exported{"h": histogram, "c": counter, "u": untyped}
	g.Expect(e.Has("h_bucket")).To(BeTrue())
	g.Expect(e.Has("c")).To(BeTrue())
	g.Expect(e.Has("c_bucket")).To(BeFalse())
	g.Expect(e.Has("u_count")).To(BeTrue())
	g.Expect(e.Has("missing")).To(BeFalse())
}
