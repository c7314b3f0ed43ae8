package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RepoRoot returns the directory holding embedops' go.mod, found by walking
// up from the working directory (go test runs in the package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if isModuleRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod of github.com/embedops/embedops above the working directory")
		}
		dir = parent
	}
}

func isModuleRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	const moduleLine = "module github.com/embedops/embedops\n"
	return len(data) >= len(moduleLine) && string(data[:len(moduleLine)]) == moduleLine
}

// Binary returns the path of a test binary (or CRD directory) in ./bin, or an error that names
// the command building it.
func Binary(root, name string) (string, error) {
	path := filepath.Join(root, "bin", name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("test binary %s is missing: run 'make tools' first: %w", name, err)
	}
	return path, nil
}

// ThirdPartyCRDPaths returns the Flux and Argo CD CRD directories that
// `make tools` copies into ./bin/crds.
func ThirdPartyCRDPaths() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, name := range []string{"crds/flux", "crds/argocd"} {
		path, err := Binary(root, name)
		if err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}
