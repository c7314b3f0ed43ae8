package audit

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/ignore"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/internal/kubeversion"
)

// argoHelm mirrors argo-cd's ApplicationSourceHelm.
type argoHelm struct {
	ValueFiles              []string          `json:"valueFiles,omitempty"`
	Parameters              []argoHelmParam   `json:"parameters,omitempty"`
	ReleaseName             string            `json:"releaseName,omitempty"`
	Values                  string            `json:"values,omitempty"`
	FileParameters          []json.RawMessage `json:"fileParameters,omitempty"`
	Version                 string            `json:"version,omitempty"`
	PassCredentials         bool              `json:"passCredentials,omitempty"`
	IgnoreMissingValueFiles bool              `json:"ignoreMissingValueFiles,omitempty"`
	SkipCrds                bool              `json:"skipCrds,omitempty"`
	ValuesObject            json.RawMessage   `json:"valuesObject,omitempty"`
	Namespace               string            `json:"namespace,omitempty"`
	KubeVersion             string            `json:"kubeVersion,omitempty"`
	APIVersions             []string          `json:"apiVersions,omitempty"`
	SkipTests               bool              `json:"skipTests,omitempty"`
	SkipSchemaValidation    bool              `json:"skipSchemaValidation,omitempty"`
}

// defaultKubeVersion is the Kubernetes version a chart is rendered for when
// the Application names none. Argo CD passes its destination cluster's
// (argo-cd v2.14.21 reposerver/repository/repository.go, helmTemplate:
// --kube-version), which the audit does not know; Helm's own default,
// v1.20.0, fails every chart whose kubeVersion asks for a Kubernetes
// embedops runs on, this project's chart among them. The oldest supported
// Kubernetes renders those charts; one that branches on the version may
// render otherwise than it did for a newer cluster, which the audit then
// reports as a Mismatch.
var defaultKubeVersion = "v" + kubeversion.Floor + ".0"

// argoHelmParam is argo-cd's HelmParameter.
type argoHelmParam struct {
	Name        string `json:"name,omitempty"`
	Value       string `json:"value,omitempty"`
	ForceString bool   `json:"forceString,omitempty"`
}

// helm renders a chart directory with the Helm SDK, as `helm template`
// does with the arguments Argo CD passes (argo-cd reposerver/repository/
// repository.go helmTemplate, util/helm/cmd.go template; helm cmd/helm/
// template.go): the Application's name as release name unless set, the
// destination namespace unless helm.namespace, value files, then inline
// values, then parameters, and CRDs included unless skipped.
func (a *argo) helm(fs *treeFS, dir string) *rendering {
	h := argoHelm{}
	if a.source.Helm != nil {
		h = *a.source.Helm
	}
	if len(h.FileParameters) > 0 {
		return &rendering{err: errors.New("helm fileParameters are not reproduced by the audit")}
	}
	chart, err := loadChart(fs, dir)
	if err != nil {
		return &rendering{err: err}
	}
	vals, err := a.helmValues(fs, dir, h)
	if err != nil {
		return &rendering{err: err}
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.Replace, install.ClientOnly = true, true, true
	install.ReleaseName = h.ReleaseName
	if install.ReleaseName == "" {
		install.ReleaseName = a.appName
	}
	install.Namespace = h.Namespace
	if install.Namespace == "" {
		install.Namespace = a.destination
	}
	install.IncludeCRDs, install.SkipSchemaValidation = !h.SkipCrds, h.SkipSchemaValidation
	install.APIVersions = h.APIVersions
	if install.KubeVersion, err = chartutil.ParseKubeVersion(cmp.Or(h.KubeVersion, defaultKubeVersion)); err != nil {
		return &rendering{err: fmt.Errorf("helm kubeVersion: %w", err)}
	}
	if deps := chart.Metadata.Dependencies; deps != nil {
		if err := action.CheckDependencies(chart, deps); err != nil {
			return &rendering{err: fmt.Errorf("the chart's dependencies are not vendored: %w", err)}
		}
	}
	rel, err := install.Run(chart, vals)
	if err != nil {
		return &rendering{err: fmt.Errorf("helm template: %w", err)}
	}
	return &rendering{resources: templateOutput(rel, h.SkipTests)}
}

// templateOutput is what `helm template` prints: the manifest, then the
// hooks, tests unless skipped.
func templateOutput(rel *release.Release, skipTests bool) []byte {
	var out bytes.Buffer
	fmt.Fprintln(&out, strings.TrimSpace(rel.Manifest))
	for _, hook := range rel.Hooks {
		if skipTests && slices.Contains(hook.Events, release.HookTest) {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", hook.Path, hook.Manifest)
	}
	return out.Bytes()
}

// loadChart reads the chart under dir, honouring .helmignore as helm's
// loader.LoadDir does.
func loadChart(fs *treeFS, dir string) (*chart.Chart, error) {
	rules := ignore.Empty()
	if data, err := fs.ReadFile(path.Join(dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("reading .helmignore: %w", err)
		}
	}
	rules.AddDefaults()
	root := path.Clean("/" + dir)
	var files []*loader.BufferedFile
	err := fs.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(path.Clean("/"+p), root), "/")
		if rel == "" {
			return nil
		}
		if info.IsDir() {
			if rules.Ignore(rel, info) {
				return filepath.SkipDir
			}
			return nil
		}
		if rules.Ignore(rel, info) {
			return nil
		}
		data, err := fs.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: rel, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the chart: %w", err)
	}
	chart, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return chart, nil
}

// helmValues merges the values as helm does (pkg/cli/values options.go
// MergeValues): value files in order, the inline values last among them,
// then --set, then --set-string. Files are written to a temporary
// directory since helm reads them from disk.
func (a *argo) helmValues(fs *treeFS, dir string, h argoHelm) (map[string]any, error) {
	work, err := os.MkdirTemp("", "embedops-helm-")
	if err != nil {
		return nil, fmt.Errorf("creating a work directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	opts := values.Options{}
	add := func(data []byte) error {
		file := filepath.Join(work, fmt.Sprintf("values-%d.yaml", len(opts.ValueFiles)))
		opts.ValueFiles = append(opts.ValueFiles, file)
		return os.WriteFile(file, data, 0o600)
	}
	for _, name := range h.ValueFiles {
		data, err := a.valueFile(fs, dir, name)
		if errors.Is(err, errAbsent) && h.IgnoreMissingValueFiles {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := add(data); err != nil {
			return nil, err
		}
	}
	if inline, err := InlineHelmValues(h.Values, h.ValuesObject); err != nil {
		return nil, err
	} else if inline != nil {
		if err := add(inline); err != nil {
			return nil, err
		}
	}
	for _, p := range sortedParams(h.Parameters) {
		arg := p.Name + "=" + cleanSetParameter(p.Value)
		if p.ForceString {
			opts.StringValues = append(opts.StringValues, arg)
		} else {
			opts.Values = append(opts.Values, arg)
		}
	}
	merged, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		return nil, fmt.Errorf("helm values: %w", err)
	}
	return merged, nil
}

// valueFile reads a value file: `$ref/...` from a ref source, a path
// relative to the chart, or from the repository root when absolute. URLs
// are not read.
func (a *argo) valueFile(fs *treeFS, dir, name string) ([]byte, error) {
	if strings.Contains(name, "://") {
		return nil, fmt.Errorf("value file %s is not in git", name)
	}
	if strings.HasPrefix(name, "$") {
		data, named, err := a.refFile(name)
		if named {
			if errors.Is(err, errAbsent) {
				return nil, fmt.Errorf("value file %s: %w", name, errAbsent)
			}
			return data, err
		}
	}
	p := path.Join(dir, name)
	if path.IsAbs(name) {
		p = name
	}
	if !fs.Exists(p) || fs.IsDir(p) {
		return nil, fmt.Errorf("value file %s is missing at the commit: %w", name, errAbsent)
	}
	return fs.ReadFile(p)
}

// InlineHelmValues is the YAML of an Application's inline values:
// valuesObject when set, else values (argo-cd types.go, ValuesYAML).
func InlineHelmValues(valuesString string, valuesObject json.RawMessage) ([]byte, error) {
	if len(valuesObject) > 0 && string(valuesObject) != "null" {
		var object map[string]any
		if err := json.Unmarshal(valuesObject, &object); err != nil {
			return nil, fmt.Errorf("helm valuesObject is not an object: %w", err)
		}
		out, err := yaml.Marshal(object)
		if err != nil {
			return nil, fmt.Errorf("helm valuesObject: %w", err)
		}
		return out, nil
	}
	if strings.TrimSpace(valuesString) == "" {
		return nil, nil
	}
	var check map[string]any
	if err := yaml.Unmarshal([]byte(valuesString), &check); err != nil {
		return nil, fmt.Errorf("helm values: %w", err)
	}
	return []byte(valuesString), nil
}

// sortedParams orders parameters by name: Argo CD passes them from a map,
// so one name appears once and their order does not matter.
func sortedParams(params []argoHelmParam) []argoHelmParam {
	byName := map[string]argoHelmParam{}
	for _, p := range params {
		byName[p.Name+"\x00"+fmt.Sprint(p.ForceString)] = p
	}
	out := make([]argoHelmParam, 0, len(byName))
	for _, key := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[key])
	}
	return out
}

// cleanSetParameter escapes commas as argo-cd util/helm/cmd.go
// cleanSetParameters does, unless the value is a {list}.
func cleanSetParameter(val string) string {
	if strings.HasPrefix(val, "{") && strings.HasSuffix(val, "}") {
		return val
	}
	var b strings.Builder
	var prev rune
	for _, r := range val {
		if r == ',' && prev != '\\' {
			b.WriteString(`\,`)
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}
