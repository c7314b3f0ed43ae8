package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// Dashboard is the part of a Grafana dashboard this module reads.
type Dashboard struct {
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is one Grafana panel; rows have no targets.
type Panel struct {
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	GridPos GridPos  `json:"gridPos"`
	Targets []Target `json:"targets"`
	Field   struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// GridPos is a panel's place on Grafana's 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

// LoadDashboard reads a dashboard's JSON.
func LoadDashboard(path string) (*Dashboard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard: %w", err)
	}
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decoding the dashboard %s: %w", path, err)
	}
	return &d, nil
}

// variables are the values Grafana substitutes in the dashboard's queries:
// its own interval variables and the dashboard's namespace variable with
// "All" selected.
var variables = strings.NewReplacer(
	"$__rate_interval", "1m",
	"${__rate_interval}", "1m",
	"$__interval", "30s",
	"$__range", "1h",
	"${namespace}", ".*",
	"$namespace", ".*",
)

// Expand substitutes Grafana's variables in expr.
func Expand(expr string) string {
	return variables.Replace(expr)
}

// queryParser parses queries as Prometheus does by default.
var queryParser = parser.NewParser(parser.Options{})

// MetricNames parses expr, with Grafana's variables substituted, and
// returns the metric name of every series selector in it; a selector
// without a literal name is an error, since it cannot be checked.
func MetricNames(expr string) ([]string, error) {
	parsed, err := queryParser.ParseExpr(Expand(expr))
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	var names []string
	var unnamed error
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		selector, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if selector.Name == "" {
			unnamed = fmt.Errorf("the selector %s in %q names no metric", selector, expr)
			return nil
		}
		names = append(names, selector.Name)
		return nil
	})
	return names, unnamed
}
