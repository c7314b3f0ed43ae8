package main

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// exampleServer is what the real node needs to know of an example server.
type exampleServer struct {
	name, model, revision string
	// hasEnv says whether the manifest sets spec.env, which a JSON patch
	// appends to rather than creates.
	hasEnv bool
	// cpu is the container's CPU request, zero when none.
	cpu resource.Quantity
}

// exampleServers reads the EmbeddingServers among the files of dir, with
// the API's default revision.
func exampleServers(dir string) ([]exampleServer, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the examples: %w", err)
	}
	var servers []exampleServer
	for _, entry := range entries {
		if !entry.Type().IsRegular() || filepath.Ext(entry.Name()) != ".yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, entry.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading the examples: %w", err)
		}
		var server embedopsv1.EmbeddingServer
		if err := yaml.Unmarshal(data, &server); err != nil {
			return nil, fmt.Errorf("reading %s: %w", entry.Name(), err)
		}
		if server.Kind != "EmbeddingServer" {
			continue
		}
		servers = append(servers, exampleServer{
			name: server.Name, model: server.Spec.Model.Name, revision: orDefault(server.Spec.Model.Revision, "main"),
			hasEnv: len(server.Spec.Env) > 0,
			cpu:    server.Spec.Resources.Requests[corev1.ResourceCPU],
		})
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("no EmbeddingServer in %s", dir)
	}
	return servers, nil
}

// orDefault is value, or def when value is empty.
func orDefault(value, def string) string {
	if value == "" {
		return def
	}
	return value
}
