package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// binaries are the commands in the image: the controller, its entrypoint,
// and the CLI whose `embedops populate` runs in init containers and Jobs.
var binaries = []string{"controller", "embedops"}

// buildBinaries compiles each command of binaries into dir as a static,
// trimmed Linux binary and returns their paths by name.
func buildBinaries(repo, dir, arch string) (map[string]string, error) {
	paths := map[string]string{}
	for _, name := range binaries {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/"+name)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false")
		if output, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building cmd/%s: %w\n%s", name, err, output)
		}
		paths[name] = out
	}
	return paths, nil
}
