package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// PauseImage is the real node's sandbox image: test/standin/pause, the
// name a NodeOptions.SandboxImage gives.
var PauseImage = ImageArchive{Package: "./test/standin/pause", Binary: "/pause", User: "65535:65535", Ref: "embedops-pause:latest"}

// ImageArchive is a single-binary image of a main package of the
// repository, on an empty base, built by test/tools/image (no container
// runtime) as a docker-archive tarball that `ctr images import` loads,
// tagged with the fully qualified name the kubelet looks up.
type ImageArchive struct {
	// Package is the main package, relative to the repository root.
	Package string
	// Binary is its path in the image, the entrypoint.
	Binary string
	// User is the uid:gid the image runs as.
	User string
	// Ref is the image's name as pods give it.
	Ref string
}

// Build writes the archive to out.
func (a ImageArchive) Build(ctx context.Context, out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "run", ".", "-repo", root, "-format", "docker-archive", "-o", out,
		"-package", a.Package, "-binary", a.Binary, "-user", a.User, "-ref", a.Ref)
	cmd.Dir = filepath.Join(root, "test", "tools", "image")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the image %s of %s: %w\n%s", a.Ref, a.Package, err, output)
	}
	return nil
}
