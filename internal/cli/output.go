package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Output formats a command can print.
const (
	outputYAML  = "yaml"
	outputJSON  = "json"
	outputTable = "table"
)

// printStructured writes v as YAML or JSON.
func printStructured(out io.Writer, format string, v any) error {
	switch format {
	case outputJSON:
		encoder := json.NewEncoder(out)
		encoder.SetIndent("", "  ")
		return encoder.Encode(v)
	case outputYAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = out.Write(data)
		return err
	default:
		return fmt.Errorf("unknown output format %q: use yaml or json", format)
	}
}
