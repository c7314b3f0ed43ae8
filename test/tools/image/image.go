package main

import (
	"errors"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Output formats.
const (
	// formatLayout is an OCI image layout directory (make image).
	formatLayout = "oci-layout"
	// formatArchive is a docker-archive tarball (`docker save`'s format),
	// which `ctr images import` loads into a node's containerd.
	formatArchive = "docker-archive"
)

// options are the command's flags.
type options struct {
	repo, out, arch, caBundle, format string
	// refs name the image: the layout records the first; the archive tags
	// the image with each, fully qualified.
	refs []string
	// pkg, when set, builds a single-binary image of this main package
	// instead of the controller image, with the fields below.
	pkg        string
	binaryPath string
	cmd, env   []string
	user       string
}

// spec is what goes into an image.
type spec struct {
	binaries   []binary
	entrypoint []string
	cmd        []string
	env        []string
	user       string
	comment    string
}

// specOf is the controller image, or the single-binary image of opts.pkg:
// the binary at opts.binaryPath as entrypoint, opts.cmd as default
// arguments.
func specOf(opts options) spec {
	if opts.pkg == "" {
		return controllerSpec()
	}
	return spec{
		binaries:   []binary{{pkg: opts.pkg, path: opts.binaryPath}},
		entrypoint: []string{opts.binaryPath},
		cmd:        opts.cmd,
		env:        opts.env,
		user:       opts.user,
		comment:    opts.pkg + " as " + opts.binaryPath + ", CA certificates",
	}
}

// run builds the binaries and writes the image, returning its manifest
// digest.
func run(opts options) (v1.Hash, error) {
	if len(opts.refs) == 0 {
		return v1.Hash{}, errors.New("no image name")
	}
	work, err := os.MkdirTemp("", "embedops-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	s := specOf(opts)
	paths, err := buildBinaries(opts.repo, work, opts.arch, s.binaries)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := rootfs(paths, opts.caBundle)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := image(layer, opts.arch, s)
	if err != nil {
		return v1.Hash{}, err
	}
	switch opts.format {
	case formatLayout:
		err = writeLayout(opts.out, opts.refs[0], opts.arch, img)
	case formatArchive:
		err = writeArchive(opts.out, opts.refs, img)
	default:
		err = fmt.Errorf("unknown format %q, want %s or %s", opts.format, formatLayout, formatArchive)
	}
	if err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// image is an OCI image on an empty base, nothing pulled: one layer and
// s's configuration.
func image(layer v1.Layer, arch string, s spec) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "embedops test/tools/image", Comment: s.comment,
	}})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	config, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	config = config.DeepCopy()
	config.OS, config.Architecture, config.Created = "linux", arch, v1.Time{Time: epoch}
	config.Config.User = s.user
	config.Config.Entrypoint = s.entrypoint
	config.Config.Cmd = s.cmd
	config.Config.WorkingDir = "/"
	config.Config.Env = s.env
	return mutate.ConfigFile(img, config)
}

// writeLayout replaces dir with an OCI image layout holding img under ref,
// for linux/arch.
func writeLayout(dir, ref, arch string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the old layout: %w", err)
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the layout: %w", err)
	}
	platform := layout.WithPlatform(v1.Platform{OS: "linux", Architecture: arch})
	if err := path.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}), platform); err != nil {
		return fmt.Errorf("writing the image: %w", err)
	}
	return nil
}
