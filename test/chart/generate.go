package chart

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// generatedHeader starts every file Generated writes.
const generatedHeader = "# Generated from config/ by `make manifests` (go test ./test/chart -run TestGeneratedFiles -update): do not edit.\n"

// Generated returns the chart's files that are copies of what config/
// renders, by path in the chart: each CRD of config/default, whole, as a
// template in CRDDir that the chart renders as CRDTemplate says; the rules of its
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
		switch {
		case name == "":
		case path.Dir(name) == CRDDir:
			if files[name], err = CRDTemplate(data); err != nil {
				return nil, err
			}
		default:
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
	// CRDDir holds the CRDs, one template each.
	CRDDir = "templates/crds"
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
		name, part = path.Join(CRDDir, fmt.Sprint(meta["name"])+".yaml"), o
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

// keepLine is the annotation config/crd gives every CRD so that Helm never
// deletes it (helm pkg/kube ResourcePolicyAnno, KeepPolicy), as the CRD's
// YAML spells it.
const keepLine = "    helm.sh/resource-policy: keep\n"

// CRDTemplate makes a CRD's YAML a template: rendered when the chart's
// embedops.crd helper says so (crds.enabled, and the cluster's CRD absent or
// not newer, by its embedops.dev/schema-version), its keep annotation unless
// crds.keep=false. Helm renders templates as Go templates, so the YAML must
// hold no action delimiter.
func CRDTemplate(crd []byte) ([]byte, error) {
	text := string(crd)
	if strings.Contains(text, "{{") {
		return nil, fmt.Errorf("a CRD holds %q, which Helm would read as a template action", "{{")
	}
	if strings.Count(text, keepLine) != 1 {
		return nil, fmt.Errorf("a CRD lacks config/crd's annotation %q", strings.TrimSpace(keepLine))
	}
	var meta struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(crd, &meta); err != nil {
		return nil, fmt.Errorf("reading a CRD's name and schema version: %w", err)
	}
	version, err := strconv.Atoi(meta.Metadata.Annotations[embedopsv1.SchemaVersionAnnotation])
	if err != nil {
		return nil, fmt.Errorf("CRD %s: annotation %s: %w", meta.Metadata.Name, embedopsv1.SchemaVersionAnnotation, err)
	}
	text = strings.Replace(text, keepLine, "{{- if "+crdValue("keep")+" }}\n"+keepLine+"{{- end }}\n", 1)
	guard := fmt.Sprintf("{{- if include %q (list . %q %d) }}\n", "embedops.crd", meta.Metadata.Name, version)
	return []byte(guard + generatedHeader + text + "{{- end }}\n"), nil
}

// crdValue reads crds.<name>, true when unset: `helm upgrade --reuse-values`
// keeps the values.yaml of the chart installed before, which has no crds.
func crdValue(name string) string {
	return fmt.Sprintf("dig %q %q true .Values.AsMap", "crds", name)
}
