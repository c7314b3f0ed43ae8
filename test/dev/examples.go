package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/test/harness"
)

// fieldManager applies the examples as a user's kubectl would.
const fieldManager = "embedops-dev"

// applyExamples server-side applies every YAML file of dir into namespace,
// Secrets first so the servers that read them are accepted at once.
func applyExamples(ctx context.Context, cluster *harness.Cluster, dir, namespace string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no examples in %s", dir)
	}
	objects := make([]*unstructured.Unstructured, 0, len(files))
	for _, file := range files {
		obj, err := readObject(file)
		if err != nil {
			return err
		}
		obj.SetNamespace(namespace)
		objects = append(objects, obj)
	}
	sort.SliceStable(objects, func(i, j int) bool { return objects[i].GetKind() == "Secret" && objects[j].GetKind() != "Secret" })
	for _, obj := range objects {
		applied := client.ApplyConfigurationFromUnstructured(obj)
		if err := cluster.Client.Apply(ctx, applied, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		fmt.Printf("dev: applied %s/%s\n", obj.GetKind(), obj.GetName())
	}
	return nil
}

func readObject(file string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, fmt.Errorf("%s is not one YAML object: %w", file, err)
	}
	return obj, nil
}
