package main

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Sizes of the picture: a Grafana grid unit in points, and the picture's
// width (Grafana's 24 columns).
const (
	columnWidth vg.Length = 36
	rowHeight   vg.Length = 24
	dpi                   = 96
)

// series is one line of a panel.
type series struct {
	legend string
	points plotter.XYs
}

// evaluate runs each of panel's queries over [start, end] every step with
// rateInterval for $__rate_interval, as Grafana asks Prometheus.
func evaluate(ctx context.Context, engine *promql.Engine, db storage.Queryable, panel Panel, start, end time.Time, step, rateInterval time.Duration) ([]series, error) {
	var out []series
	for _, target := range panel.Targets {
		expr := strings.ReplaceAll(strings.ReplaceAll(target.Expr, "$__rate_interval", model.Duration(rateInterval).String()), "${__rate_interval}", model.Duration(rateInterval).String())
		query, err := engine.NewRangeQuery(ctx, db, nil, Expand(expr), start, end, step)
		if err != nil {
			return nil, fmt.Errorf("panel %q: %w", panel.Title, err)
		}
		result := query.Exec(ctx)
		query.Close()
		if result.Err != nil {
			return nil, fmt.Errorf("panel %q: evaluating %s: %w", panel.Title, target.Expr, result.Err)
		}
		matrix, err := result.Matrix()
		if err != nil {
			return nil, fmt.Errorf("panel %q: %w", panel.Title, err)
		}
		for _, s := range matrix {
			line := series{legend: legend(target.LegendFormat, s.Metric.Map())}
			for _, p := range s.Floats {
				if math.IsNaN(p.F) || math.IsInf(p.F, 0) {
					continue
				}
				line.points = append(line.points, plotter.XY{X: float64(p.T-start.UnixMilli()) / 1000, Y: p.F})
			}
			if len(line.points) > 0 {
				out = append(out, line)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].legend < out[j].legend })
	return out, nil
}

// legend fills a Grafana legend format's {{label}} references.
func legend(format string, labels map[string]string) string {
	for name, value := range labels {
		format = strings.ReplaceAll(format, "{{"+name+"}}", value)
		format = strings.ReplaceAll(format, "{{ "+name+" }}", value)
	}
	return format
}

// panelPlot draws one panel's series.
func panelPlot(panel Panel, lines []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = panel.Title
	p.Title.TextStyle.Font.Size = 11
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = unitLabel(panel.Field.Defaults.Unit)
	for _, axis := range []*plot.Axis{&p.X, &p.Y} {
		axis.Label.TextStyle.Font.Size = 8
		axis.Tick.Label.Font.Size = 7
	}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = 7
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	if len(lines) == 0 {
		p.Title.Text += " (no data)"
		return p, nil
	}
	top := 0.0
	for _, line := range lines {
		for _, point := range line.points {
			top = max(top, point.Y)
		}
	}
	if top == 0 {
		// All zero: keep the zero line at the bottom, as Grafana does.
		p.Y.Max = 1
	}
	for i, line := range lines {
		l, err := plotter.NewLine(line.points)
		if err != nil {
			return nil, fmt.Errorf("panel %q: %w", panel.Title, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(line.legend, l)
	}
	return p, nil
}

// unitLabel names a Grafana unit on an axis.
func unitLabel(unit string) string {
	switch unit {
	case "s":
		return "seconds"
	case "ops", "reqps":
		return "per second"
	case "bytes":
		return "bytes"
	default:
		return ""
	}
}

// drawDashboard lays the panels out on Grafana's grid, one canvas.
func drawDashboard(d *Dashboard, plots map[int]*plot.Plot) (*vgimg.PngCanvas, error) {
	rows := 0
	for _, panel := range d.Panels {
		rows = max(rows, panel.GridPos.Y+panel.GridPos.H)
	}
	width, height := 24*columnWidth, vg.Length(rows)*rowHeight
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	for i, panel := range d.Panels {
		x0 := vg.Length(panel.GridPos.X) * columnWidth
		top := height - vg.Length(panel.GridPos.Y)*rowHeight
		bottom := top - vg.Length(panel.GridPos.H)*rowHeight
		area := draw.Canvas{Canvas: dc, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x0 + 4, Y: bottom + 4},
			Max: vg.Point{X: x0 + vg.Length(panel.GridPos.W)*columnWidth - 4, Y: top - 4},
		}}
		if panel.Type == "row" {
			style := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 13), Handler: plot.DefaultTextHandler}
			area.FillText(style, vg.Point{X: area.Min.X, Y: area.Min.Y + 4}, panel.Title)
			continue
		}
		p, ok := plots[i]
		if !ok {
			return nil, fmt.Errorf("panel %q was not drawn", panel.Title)
		}
		p.Draw(area)
	}
	return &vgimg.PngCanvas{Canvas: img}, nil
}
