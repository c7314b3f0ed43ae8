package chart

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// prometheusLine is config/default's commented-out resource for
// config/prometheus.
const prometheusLine = "#  - ../prometheus\n"

// ConfigDefault renders config/default of the repository at root as
// `kustomize build` does; with prometheus, it first uncomments
// config/prometheus in config/default's resources, as its comment says to
// where the Prometheus Operator runs.
func ConfigDefault(root string, prometheus bool) ([]Object, error) {
	mem := filesys.MakeFsInMemory()
	config := os.DirFS(filepath.Join(root, "config"))
	err := fs.WalkDir(config, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(config, p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/config", p), data)
	})
	if err != nil {
		return nil, fmt.Errorf("copying config/: %w", err)
	}
	if prometheus {
		if err := enablePrometheus(mem); err != nil {
			return nil, err
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/config/default")
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/default: %w", err)
	}
	return objectsOf(m, "")
}

// enablePrometheus uncomments config/prometheus in config/default.
func enablePrometheus(mem filesys.FileSystem) error {
	file := "/config/default/kustomization.yaml"
	data, err := mem.ReadFile(file)
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), prometheusLine) {
		return fmt.Errorf("config/default/kustomization.yaml has no line %q to uncomment", strings.TrimSpace(prometheusLine))
	}
	return mem.WriteFile(file, []byte(strings.Replace(string(data), prometheusLine, "  - ../prometheus\n", 1)))
}

// ConfigGrafana renders config/grafana of the repository at root, its
// objects put in namespace as `kustomize edit set namespace` would.
func ConfigGrafana(root, namespace string) ([]Object, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", "grafana"))
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/grafana: %w", err)
	}
	return objectsOf(m, namespace)
}

// objectsOf are the normalized objects of a kustomize build, put in
// namespace unless it is empty.
func objectsOf(m resmap.ResMap, namespace string) ([]Object, error) {
	objects := make([]Object, 0, m.Size())
	for _, r := range m.Resources() {
		if namespace != "" {
			if err := r.SetNamespace(namespace); err != nil {
				return nil, err
			}
		}
		data, err := r.Map()
		if err != nil {
			return nil, err
		}
		o, err := normalize(data)
		if err != nil {
			return nil, err
		}
		objects = append(objects, o)
	}
	return objects, nil
}
