package decision

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// typeHeader is the part of a document that says what it is.
type typeHeader struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// ServersFromYAML returns the EmbeddingServers in a YAML or JSON stream of
// documents, skipping other kinds. A server without a namespace gets
// defaultNamespace, as `kubectl apply -n` would give it.
func ServersFromYAML(data []byte, defaultNamespace string) ([]*embedopsv1.EmbeddingServer, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var servers []*embedopsv1.EmbeddingServer
	for index := 0; ; index++ {
		document, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return servers, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d: %w", index+1, err)
		}
		server, err := serverFromDocument(document, defaultNamespace)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", index+1, err)
		}
		if server != nil {
			servers = append(servers, server)
		}
	}
}

// serverFromDocument decodes one document strictly when it is an
// EmbeddingServer, and returns nil for any other kind or an empty document.
func serverFromDocument(document []byte, defaultNamespace string) (*embedopsv1.EmbeddingServer, error) {
	var header typeHeader
	if err := yaml.Unmarshal(document, &header); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	if header.Kind != embedopsv1.EmbeddingServerKind || header.APIVersion != embedopsv1.GroupVersion.String() {
		return nil, nil
	}
	server := &embedopsv1.EmbeddingServer{}
	if err := yaml.UnmarshalStrict(document, server); err != nil {
		return nil, fmt.Errorf("%w: decoding EmbeddingServer: %w", ErrInvalidSpec, err)
	}
	if server.Namespace == "" {
		server.Namespace = defaultNamespace
	}
	return server, nil
}
