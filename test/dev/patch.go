package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// kustomizationFile is the examples' kustomization, which Flux and Argo CD
// build.
const kustomizationFile = "Kustomization"

// maxCPURequest is the most CPU a server asks for on the real node, which
// has the machine's cores (2 here) for every pod: advanced asks for 2.
var maxCPURequest = resource.MustParse("1")

// devPatches adds to the examples' kustomization a JSON patch per server
// that sets HF_ENDPOINT to the hub stand-in, so that the populator and TEI
// download from it instead of huggingface.co, and caps its CPU request at
// maxCPURequest. They are committed with the examples, so the audit
// renders what the GitOps tool applied; neither is part of a cache decision. It
// returns the kustomization and what the patches change, for people.
func devPatches(kustomization string, servers []exampleServer) (string, []string, error) {
	if strings.Contains(kustomization, "\npatches:") {
		return "", nil, errors.New("the examples' Kustomization already has patches")
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(kustomization, "\n"))
	b.WriteString("\n# Added by make dev on a real node: the servers download from the hub\n")
	b.WriteString("# stand-in running in the cluster, not from huggingface.co, and ask for\n")
	fmt.Fprintf(&b, "# at most %s CPU, so that all of them fit on one small node.\npatches:\n", maxCPURequest.String())
	changes := []string{"HF_ENDPOINT=" + hubEndpoint + " on every server"}
	for _, s := range servers {
		ops := []map[string]any{envPatch(s)}
		if s.cpu.Cmp(maxCPURequest) > 0 {
			ops = append(ops, map[string]any{"op": "replace", "path": "/spec/resources/requests/cpu", "value": maxCPURequest.String()})
			changes = append(changes, fmt.Sprintf("%s's CPU request %s -> %s", s.name, s.cpu.String(), maxCPURequest.String()))
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&b, "  - target: {kind: EmbeddingServer, name: %s}\n    patch: '%s'\n", s.name, patch)
	}
	return b.String(), changes, nil
}

// envPatch is the JSON patch operation that adds HF_ENDPOINT to a server's
// env, creating the list when the manifest has none.
func envPatch(s exampleServer) map[string]any {
	variable := map[string]string{"name": "HF_ENDPOINT", "value": hubEndpoint}
	if s.hasEnv {
		return map[string]any{"op": "add", "path": "/spec/env/-", "value": variable}
	}
	return map[string]any{"op": "add", "path": "/spec/env", "value": []any{variable}}
}
