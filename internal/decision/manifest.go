package decision

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"

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
	if err := checkRawSize(document); err != nil {
		return nil, err
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

// rawSize is the one field read before a document is decoded.
type rawSize struct {
	Spec struct {
		Cache struct {
			Size any `json:"size"`
		} `json:"cache"`
	} `json:"spec"`
}

// maxSizeLength and hugeExponent mirror the CRD's admission rule for
// spec.cache.size.
const maxSizeLength = 32

var hugeExponent = regexp.MustCompile(`[eE][-+]?[0-9]{3}`)

// checkRawSize refuses, before decoding, the cache sizes admission refuses
// for their form: decoding "1e-100000000" as a quantity takes minutes.
func checkRawSize(document []byte) error {
	var raw rawSize
	if err := yaml.Unmarshal(document, &raw); err != nil {
		return fmt.Errorf("parsing YAML: %w", err)
	}
	size := fmt.Sprint(raw.Spec.Cache.Size)
	if raw.Spec.Cache.Size == nil || (len(size) <= maxSizeLength && !hugeExponent.MatchString(size)) {
		return nil
	}
	return fmt.Errorf("%w: spec.cache.size must be at most %d characters with an exponent of at most two digits", ErrInvalidSpec, maxSizeLength)
}
