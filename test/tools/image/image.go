package main

import (
	"fmt"
	"os"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// options are the command's flags.
type options struct {
	repo, out, ref, arch, caBundle string
}

// run builds the binaries and writes the layout, returning the manifest
// digest.
func run(opts options) (v1.Hash, error) {
	work, err := os.MkdirTemp("", "embedops-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	paths, err := buildBinaries(opts.repo, work, opts.arch)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := rootfs(paths, opts.caBundle)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := image(layer, opts.arch)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeLayout(opts.out, opts.ref, opts.arch, img); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// image is an OCI image on an empty base, nothing pulled: one layer, run as
// the non-root user, the controller as entrypoint.
func image(layer v1.Layer, arch string) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "embedops make image", Comment: "controller, embedops, CA certificates, nonroot user",
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
	config.Config.User = strconv.Itoa(nonRootID) + ":" + strconv.Itoa(nonRootID)
	config.Config.Entrypoint = []string{"/controller"}
	config.Config.WorkingDir = "/"
	config.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
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
