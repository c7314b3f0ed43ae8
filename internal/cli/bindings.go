package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// bindingsFromCluster reads the named bindings, or all of namespace ("" for
// every namespace) when no name is given.
func bindingsFromCluster(ctx context.Context, c client.Client, namespace string, names []string) ([]embedopsv1.ModelCacheBinding, error) {
	if len(names) == 0 {
		var list embedopsv1.ModelCacheBindingList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing ModelCacheBindings: %w", err)
		}
		return list.Items, nil
	}
	if namespace == "" {
		return nil, usageErrorf("binding names need a namespace: drop --all-namespaces")
	}
	bindings := make([]embedopsv1.ModelCacheBinding, 0, len(names))
	for _, name := range names {
		var b embedopsv1.ModelCacheBinding
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &b); err != nil {
			return nil, fmt.Errorf("reading ModelCacheBinding %s/%s: %w", namespace, name, err)
		}
		bindings = append(bindings, b)
	}
	return bindings, nil
}

// bindingsFromYAML reads bindings from a YAML or JSON stream: single
// objects and kubectl List dumps (kubectl get mcb -o yaml) alike.
func bindingsFromYAML(data []byte) ([]embedopsv1.ModelCacheBinding, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var bindings []embedopsv1.ModelCacheBinding
	for index := 1; ; index++ {
		document, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return bindings, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d: %w", index, err)
		}
		found, err := bindingsFromDocument(document)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", index, err)
		}
		bindings = append(bindings, found...)
	}
}

// bindingsFromDocument returns the bindings of one document: the object
// itself or the items of a List; other kinds give none.
func bindingsFromDocument(document []byte) ([]embedopsv1.ModelCacheBinding, error) {
	var header struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(document, &header); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	switch header.Kind {
	case embedopsv1.ModelCacheBindingKind:
		var b embedopsv1.ModelCacheBinding
		if err := yaml.Unmarshal(document, &b); err != nil {
			return nil, fmt.Errorf("decoding ModelCacheBinding: %w", err)
		}
		return []embedopsv1.ModelCacheBinding{b}, nil
	case "List", "ModelCacheBindingList":
		var bindings []embedopsv1.ModelCacheBinding
		for _, item := range header.Items {
			found, err := bindingsFromDocument(item)
			if err != nil {
				return nil, err
			}
			bindings = append(bindings, found...)
		}
		return bindings, nil
	default:
		return nil, nil
	}
}
