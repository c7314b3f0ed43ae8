package chart

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/ignore"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/internal/kubeversion"
)

// Dir is the chart's directory, relative to the repository root.
const Dir = "charts/embedops"

// Release is how a chart is installed: the release's name and namespace
// and the values given, merged over the chart's values.yaml.
type Release struct {
	Name      string
	Namespace string
	Values    map[string]any
	// KubeVersion is the cluster's Kubernetes version, as `helm template
	// --kube-version` takes it and as Argo CD passes the cluster's; empty
	// means the oldest supported, kubeversion.Floor, rather than Helm's
	// library default v1.20.0, which the chart's kubeVersion refuses.
	KubeVersion string
}

// Load reads the chart in dir of fsys as `helm install <dir>` does,
// leaving out what .helmignore names.
func Load(fsys filesys.FileSystem, dir string) (*chart.Chart, error) {
	rules := ignore.Empty()
	if data, err := fsys.ReadFile(filepath.Join(dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("reading .helmignore: %w", err)
		}
	}
	rules.AddDefaults()
	var files []*loader.BufferedFile
	root := "" // dir as Walk spells it, which an in-memory fsys makes absolute
	err := fsys.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || root == "" {
			root = path
			return err
		}
		name, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name = filepath.ToSlash(name)
		if rules.Ignore(name, info) {
			if info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if info.IsDir() {
			return nil
		}
		data, err := fsys.ReadFile(path)
		files = append(files, &loader.BufferedFile{Name: name, Data: data})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the chart in %s: %w", dir, err)
	}
	return loader.LoadFiles(files)
}

// Render renders c as `helm template --include-crds --kube-version` does
// (r.KubeVersion), checking the values against the chart's schema, and
// returns its objects, CRDs first.
func Render(c *chart.Chart, r Release) ([]Object, error) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.IncludeCRDs = true
	install.ReleaseName, install.Namespace = r.Name, r.Namespace
	kubeVersion, err := chartutil.ParseKubeVersion(cmp.Or(r.KubeVersion, "v"+kubeversion.Floor+".0"))
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kubeVersion
	values := r.Values
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, err
	}
	return splitManifest(rel.Manifest)
}

// splitManifest parses a rendered manifest into objects, dropping empty
// documents.
func splitManifest(manifest string) ([]Object, error) {
	var objects []Object
	for _, doc := range releaseutil.SplitManifests(manifest) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o Object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("parsing a rendered document: %w\n%s", err, doc)
		}
		if len(o) > 0 {
			objects = append(objects, o)
		}
	}
	return objects, nil
}
