package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Row is one line of a report table.
type Row struct {
	Metric, Value, Note string
}

// Report is a benchmark result that prints as a table or as JSON.
type Report interface {
	Rows() []Row
}

// Print writes report as a table or, when format is "json", as JSON.
func Print(w io.Writer, report Report, format string) error {
	switch format {
	case "json":
		encoder := json.NewEncoder(w)
		encoder.SetIndent("", "  ")
		return encoder.Encode(report)
	case "table", "":
		table := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		_, _ = fmt.Fprintln(table, "METRIC\tVALUE\tNOTE")
		for _, row := range report.Rows() {
			_, _ = fmt.Fprintf(table, "%s\t%s\t%s\n", row.Metric, row.Value, row.Note)
		}
		return table.Flush()
	default:
		return fmt.Errorf("unknown output format %q: use table or json", format)
	}
}
