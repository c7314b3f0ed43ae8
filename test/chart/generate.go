package chart

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// generatedHeader starts every file Generated writes.
const generatedHeader = "# Generated from config/ by `make manifests` (go test ./test/chart -run TestGeneratedFiles -update): do not edit.\n"

// Generated returns the chart's files that are copies of what config/
// renders, by path in the chart: each CRD of config/default, whole, in
// crds/ (Helm installs them and never deletes them); the rules of its
// manager role, which controller-gen writes from the RBAC markers; the
// spec of config/prometheus's PrometheusRule, whose alert templates Helm
// would otherwise read as its own; config/grafana's dashboard, as is (JSON
// has no comments, so no header).
func Generated(root string) (map[string][]byte, error) {
	objects, err := ConfigDefault(root, true)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, o := range objects {
		name, data, err := generatedFile(o)
		if err != nil {
			return nil, err
		}
		if name != "" {
			files[name] = append([]byte(generatedHeader), data...)
		}
	}
	dashboard, err := os.ReadFile(filepath.Join(root, "config", "grafana", "embedops.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard: %w", err)
	}
	files[GrafanaDashboard] = dashboard
	for _, name := range []string{ManagerRoleRules, AlertsSpec} {
		if files[name] == nil {
			return nil, fmt.Errorf("config/default renders nothing for %s", name)
		}
	}
	return files, nil
}

// The generated files the templates read, by path in the chart.
const (
	// ManagerRoleRules holds the manager ClusterRole's rules.
	ManagerRoleRules = "files/manager-role-rules.yaml"
	// AlertsSpec holds the PrometheusRule's spec.
	AlertsSpec = "files/alerts-spec.yaml"
	// GrafanaDashboard is config/grafana's dashboard.
	GrafanaDashboard = "files/grafana-dashboard.json"
)

// generatedFile is the chart file o contributes, if any, and its YAML.
func generatedFile(o Object) (string, []byte, error) {
	var name string
	var part any
	switch meta, _ := o["metadata"].(map[string]any); {
	case o.Kind() == "CustomResourceDefinition":
		name, part = path.Join("crds", fmt.Sprint(meta["name"])+".yaml"), o
	case o.Kind() == "ClusterRole" && meta["name"] == "embedops-manager-role":
		name, part = ManagerRoleRules, o["rules"]
	case o.Kind() == "PrometheusRule":
		name, part = AlertsSpec, o["spec"]
	default:
		return "", nil, nil
	}
	data, err := yaml.Marshal(part)
	return name, data, err
}
