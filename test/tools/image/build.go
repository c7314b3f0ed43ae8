package main

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// controllerBinaries are the commands in the controller image: the
// controller, its entrypoint, and the CLI whose `embedops populate` runs in
// init containers and Jobs.
var controllerBinaries = []string{"controller", "embedops"}

// binary is a file of the image built from a Go package.
type binary struct {
	// pkg is the main package, relative to the repository ("./cmd/controller").
	pkg string
	// path is where the image holds it, absolute.
	path string
}

// controllerSpec is the controller image: both commands at the root, run
// as the non-root user, the controller as entrypoint.
func controllerSpec() spec {
	var binaries []binary
	for _, name := range controllerBinaries {
		binaries = append(binaries, binary{pkg: "./cmd/" + name, path: "/" + name})
	}
	return spec{
		binaries:   binaries,
		entrypoint: []string{"/controller"},
		env:        []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		user:       nonRootUser,
		comment:    "controller, embedops, CA certificates, nonroot user",
	}
}

// buildBinaries compiles each binary into dir as a static, trimmed Linux
// binary and returns their local paths by path in the image.
func buildBinaries(repo, dir, arch string, binaries []binary) (map[string]string, error) {
	paths := map[string]string{}
	for i, b := range binaries {
		out := filepath.Join(dir, fmt.Sprintf("%d-%s", i, path.Base(b.path)))
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, b.pkg)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false")
		if output, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %w\n%s", b.pkg, err, output)
		}
		paths[b.path] = out
	}
	return paths, nil
}
