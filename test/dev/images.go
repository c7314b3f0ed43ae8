package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/embedops/embedops/internal/tei"
	"github.com/embedops/embedops/test/harness"
)

// Image names of the real node that are not the examples' own.
const (
	// controllerImage is the controller image, also the populator
	// (--populator-image), as config/manager uses one image for both. Not
	// :latest, which the kubelet would always pull.
	controllerImage = "embedops-controller:dev"
	// hubImage is the hub stand-in's image.
	hubImage = "embedops-hub-standin:dev"
	// teiBinary is where TEI's images keep the router (Dockerfile, v1.9.3).
	teiBinary = "/usr/local/bin/text-embeddings-router"
	// cudaBackends is what the TEI stand-in offers under a CUDA image name:
	// TEI's CUDA images are built with candle only (Dockerfile-cuda).
	cudaBackends = "EMBEDOPS_STANDIN_BACKENDS=candle"
)

// image is one image archive to build with test/tools/image.
type image struct {
	// name is the file's name in the images directory.
	name string
	// args are test/tools/image's flags besides -repo, -format and -o.
	args []string
}

// realImages are the images the real node needs: the sandbox, the
// controller and populator, the hub stand-in and a TEI stand-in under each
// TEI image the examples name (teiImages).
func realImages(teiImages []string) []image {
	pause := harness.PauseImage
	images := []image{
		{name: "pause", args: []string{"-package", pause.Package, "-binary", pause.Binary, "-user", pause.User, "-ref", pause.Ref}},
		{name: "controller", args: []string{"-ref", controllerImage}},
		{name: "hub", args: []string{"-package", "./test/standin/hub", "-binary", "/hub", "-user", "65534:65534", "-ref", hubImage}},
	}
	for i, ref := range teiImages {
		args := []string{"-package", "./test/standin/tei", "-binary", teiBinary, "-cmd", "--json-output", "-user=", "-ref", ref}
		for _, name := range slices.Sorted(maps.Keys(tei.ImageEnv)) {
			args = append(args, "-env", name+"="+tei.ImageEnv[name])
		}
		if !cpuImage(ref) {
			args = append(args, "-env", cudaBackends)
		}
		images = append(images, image{name: fmt.Sprintf("tei-%d", i), args: args})
	}
	return images
}

// cpuImage reports whether a TEI image is a CPU one: TEI tags those
// cpu-<version> and its CUDA images by version or architecture.
func cpuImage(ref string) bool {
	tag := ref[strings.LastIndex(ref, ":")+1:]
	return strings.HasPrefix(tag, "cpu-")
}

// buildImages builds every image into dir, two at a time, and returns the
// archives' paths.
func buildImages(ctx context.Context, dir string, images []image) ([]string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the images directory: %w", err)
	}
	archives := make([]string, len(images))
	group, ctx := errgroup.WithContext(ctx)
	group.SetLimit(2)
	for i, img := range images {
		archives[i] = filepath.Join(dir, img.name+".tar")
		group.Go(func() error { return buildImage(ctx, root, archives[i], img) })
	}
	return archives, group.Wait()
}

// buildImage runs test/tools/image for one image.
func buildImage(ctx context.Context, root, out string, img image) error {
	args := append([]string{"run", ".", "-repo", root, "-format", "docker-archive", "-o", out}, img.args...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, "test", "tools", "image")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the %s image: %w\n%s", img.name, err, output)
	}
	return nil
}
