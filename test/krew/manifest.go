package main

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// The krew Plugin manifest (krew pkg/index: Plugin, PluginSpec, Platform),
// with only the fields embedops fills.
type plugin struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   metadata   `json:"metadata"`
	Spec       pluginSpec `json:"spec"`
}

type metadata struct {
	Name string `json:"name"`
}

type pluginSpec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage,omitempty"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description"`
	Platforms        []platform `json:"platforms"`
}

type platform struct {
	Selector selector `json:"selector"`
	URI      string   `json:"uri"`
	SHA256   string   `json:"sha256"`
	Bin      string   `json:"bin"`
}

type selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// Manifest constants: krew names the plugin after the kubectl command.
const (
	pluginName  = "embedops"
	pluginBin   = "kubectl-" + pluginName
	krewVersion = "krew.googlecontainertools.github.com/v1alpha2"
)

// manifestOf is the Plugin manifest for the archives.
func manifestOf(version string, archives []archive) plugin {
	p := plugin{
		APIVersion: krewVersion,
		Kind:       "Plugin",
		Metadata:   metadata{Name: pluginName},
		Spec: pluginSpec{
			Version:          version,
			ShortDescription: "Audit embedops cache decisions against the git commits that made them",
			Description: "kubectl embedops reads the ModelCacheBindings embedops records, re-renders each\n" +
				"recorded git commit as Flux or Argo CD did and says Verified or Mismatch (audit),\n" +
				"prints the decisions a manifest will record (decide), and follows a server to its\n" +
				"caches, claims and commit (trace).\n",
		},
	}
	for _, a := range archives {
		p.Spec.Platforms = append(p.Spec.Platforms, platform{
			Selector: selector{MatchLabels: map[string]string{"os": a.os, "arch": a.arch}},
			URI:      a.uri,
			SHA256:   a.sha256,
			Bin:      pluginBin,
		})
	}
	return p
}

// marshal renders the manifest as krew reads it.
func (p plugin) marshal() ([]byte, error) {
	data, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the krew manifest: %w", err)
	}
	return data, nil
}
