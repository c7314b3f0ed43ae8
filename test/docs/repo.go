package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/internal/cli"
)

// Repo is what a document may name in the working tree.
type Repo struct {
	root string
	// files holds every file and directory, slash-separated and relative
	// to root, outside the generated and hidden directories.
	files set
	// topLevel holds the names at the root, generated ones included.
	topLevel set
	goIndex  *goIndex
	// configText is the text of the configuration files (YAML, JSON, Lua,
	// templates and the Makefile), comment lines dropped.
	configText string
	// configWords holds the words of configText.
	configWords set
	// makeTargets holds the Makefile's targets.
	makeTargets set
	// crds holds each CRD's OpenAPI schema of its served version.
	crds []map[string]any
	// values is the chart's values.yaml.
	values map[string]any
	// cli is the embedops command tree.
	cli *cobra.Command
}

// generatedDirs are named by the docs but absent from a fresh clone:
// `make tools` builds ./bin (the Makefile's BIN).
var generatedDirs = set{"bin": true}

// skippedDirs are never walked: version control and generated binaries.
var skippedDirs = set{".git": true, "bin": true, "node_modules": true}

// ownDir is this package, whose tests hold made-up names: its string
// literals are not read as strings the tree uses.
const ownDir = "test/docs"

// configExts are the files whose text counts as configuration.
var configExts = set{".yaml": true, ".yml": true, ".json": true, ".lua": true, ".tpl": true}

// LoadRepo reads the working tree at root.
func LoadRepo(root string) (*Repo, error) {
	r := &Repo{root: root, files: set{}, topLevel: set{}, configWords: set{}}
	for name := range generatedDirs {
		r.topLevel[name] = true
	}
	var goFiles []string
	var config strings.Builder
	err := filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(file, root+string(filepath.Separator)))
		if file == root {
			return nil
		}
		if d.IsDir() && skippedDirs[d.Name()] {
			return filepath.SkipDir
		}
		r.files[rel] = true
		if !strings.Contains(rel, "/") {
			r.topLevel[rel] = true
		}
		switch {
		case d.IsDir():
		case strings.HasSuffix(rel, ".go") && !strings.Contains("/"+rel, "/testdata/"):
			goFiles = append(goFiles, rel)
		case configExts[filepath.Ext(rel)] || rel == "Makefile":
			if err := appendConfig(&config, file); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	if r.goIndex, err = newGoIndex(root, goFiles); err != nil {
		return nil, fmt.Errorf("read the Go source: %w", err)
	}
	r.configText = config.String()
	for _, word := range configWord.FindAllString(r.configText, -1) {
		r.configWords[word] = true
	}
	if err := r.loadMakefile(); err != nil {
		return nil, err
	}
	if err := r.loadCRDs(); err != nil {
		return nil, err
	}
	if err := readYAML(filepath.Join(root, "charts/embedops/values.yaml"), &r.values); err != nil {
		return nil, err
	}
	r.cli = cli.NewRootCommand()
	// cobra adds its completion command when the command runs; the docs
	// name it as users see it.
	r.cli.InitDefaultCompletionCmd()
	return r, nil
}

// configWord is a word of a configuration file: a key, a value, a name.
var configWord = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_-]*`)

// commentLine is a YAML, Makefile or Lua comment line.
var commentLine = regexp.MustCompile(`^\s*(#|--)`)

// appendConfig adds a configuration file's lines, comments dropped.
func appendConfig(config *strings.Builder, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if !commentLine.MatchString(line) {
			config.WriteString(line + "\n")
		}
	}
	return nil
}

// makeTarget matches a rule's targets; := and ?= are assignments.
var makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9][A-Za-z0-9_.-]*(?: [A-Za-z0-9][A-Za-z0-9_.-]*)*)\s*:([^=]|$)`)

// loadMakefile reads the Makefile's targets.
func (r *Repo) loadMakefile() error {
	data, err := os.ReadFile(filepath.Join(r.root, "Makefile"))
	if err != nil {
		return fmt.Errorf("read the Makefile: %w", err)
	}
	r.makeTargets = set{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(data), -1) {
		for target := range strings.FieldsSeq(m[1]) {
			r.makeTargets[target] = true
		}
	}
	return nil
}

// loadCRDs reads the schemas of config/crd/bases.
func (r *Repo) loadCRDs() error {
	files, err := filepath.Glob(filepath.Join(r.root, "config/crd/bases/*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in config/crd/bases: %w", err)
	}
	for _, file := range files {
		var crd struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := readYAML(file, &crd); err != nil {
			return err
		}
		for _, version := range crd.Spec.Versions {
			r.crds = append(r.crds, version.Schema.OpenAPIV3Schema)
		}
	}
	return nil
}

// readYAML decodes a YAML file.
func readYAML(file string, into any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("decode %s: %w", file, err)
	}
	return nil
}
