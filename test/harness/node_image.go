package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"golang.org/x/sync/errgroup"
)

// ImageArchive is an image built by test/tools/image (no container
// runtime) as a docker-archive tarball that `ctr images import` loads,
// tagged with the fully qualified names the kubelet looks up
// (docker.io/library/<name> for a short name). With a Package it is a
// single-binary image of that main package on an empty base; without one,
// the controller image `make image` builds.
type ImageArchive struct {
	// File is the archive's file name in the images directory
	// (bin/images for `make images`).
	File string
	// Package is the main package, relative to the repository root; empty
	// for the controller image.
	Package string
	// Binary is its path in the image, the entrypoint.
	Binary string
	// Cmd are the image's default arguments (its CMD).
	Cmd []string
	// Env are NAME=value entries of the image's ENV.
	Env []string
	// User is the uid:gid the image runs as; empty runs as root.
	User string
	// Ref is the image's name as pods give it.
	Ref string
	// ExtraRefs are more names of the image.
	ExtraRefs []string
	// RefConsts are more names, each read from a string constant of the
	// repository (test/tools/image -ref-const, "api/v1alpha1.DefaultImage"),
	// so no registry's name is copied here.
	RefConsts []string
	// RefExamples are more names, each read from spec.image of an example
	// (test/tools/image -ref-example, "examples/advanced.yaml").
	RefExamples []string
}

// args are test/tools/image's flags for the image, written to out.
func (a ImageArchive) args(root, out string) []string {
	args := []string{"-repo", root, "-format", "docker-archive", "-o", out}
	for _, ref := range append([]string{a.Ref}, a.ExtraRefs...) {
		args = append(args, "-ref", ref)
	}
	for _, c := range a.RefConsts {
		args = append(args, "-ref-const", c)
	}
	for _, e := range a.RefExamples {
		args = append(args, "-ref-example", e)
	}
	if a.Package == "" {
		return args
	}
	args = append(args, "-package", a.Package, "-binary", a.Binary, "-user="+a.User)
	for _, c := range a.Cmd {
		args = append(args, "-cmd="+c)
	}
	for _, e := range a.Env {
		args = append(args, "-env="+e)
	}
	return args
}

// Build writes the archive to out.
func (a ImageArchive) Build(ctx context.Context, out string) error {
	_, err := BuildImages(ctx, filepath.Dir(out), a.withFile(filepath.Base(out)))
	return err
}

// withFile is a with File set.
func (a ImageArchive) withFile(file string) ImageArchive {
	a.File = file
	return a
}

// imageBuilds is how many images BuildImages builds at once: each is a Go
// build, on 2 cores.
const imageBuilds = 2

// BuildImages builds each image into dir under its File and returns the
// archives' paths in order. test/tools/image is compiled once for all.
func BuildImages(ctx context.Context, dir string, images ...ImageArchive) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the images directory: %w", err)
	}
	tool, err := buildImageTool(ctx, root)
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(tool)) }()
	archives := make([]string, len(images))
	group, ctx := errgroup.WithContext(ctx)
	group.SetLimit(imageBuilds)
	for i, image := range images {
		archives[i] = filepath.Join(dir, image.File)
		group.Go(func() error {
			output, err := exec.CommandContext(ctx, tool, image.args(root, archives[i])...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("building the image %s: %w\n%s", image.Ref, err, output)
			}
			return nil
		})
	}
	return archives, group.Wait()
}

// buildImageTool compiles test/tools/image (its own module) into a
// temporary directory.
func buildImageTool(ctx context.Context, root string) (string, error) {
	dir, err := os.MkdirTemp("", "embedops-image-tool-")
	if err != nil {
		return "", err
	}
	tool := filepath.Join(dir, "image")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tool, ".")
	cmd.Dir = filepath.Join(root, "test", "tools", "image")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	if output, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("building test/tools/image: %w\n%s", err, output)
	}
	return tool, nil
}

// PauseImage is the real node's sandbox image: test/standin/pause, the
// name a NodeOptions.SandboxImage gives.
var PauseImage = ImageArchive{File: "pause.tar", Package: "./test/standin/pause", Binary: "/pause", User: "65535:65535", Ref: "embedops-pause:latest"}

// NodeImages are the images the real node runs the operator's workload
// with, as `make images` writes them to bin/images: the sandbox, the
// controller (also the populator), the hub stand-in and the TEI stand-in
// under the CPU and the CUDA image names.
func NodeImages() []ImageArchive {
	return slices.Clone([]ImageArchive{PauseImage, ControllerImage, HubImage, TEIImage, TEICUDAImage})
}
