package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dockerHubDomain is the domain Kubernetes and containerd give a name
// without one ("embedops-controller:latest" is looked up as
// "docker.io/library/embedops-controller:latest", distribution/reference
// normalize.go); go-containerregistry spells it "index.docker.io", which the
// archive's tags do not use.
const dockerHubDomain = "docker.io"

// archiveManifest is the docker-archive's manifest.json.
const archiveManifest = "manifest.json"

// writeArchive writes img to path as a docker-archive tarball tagged with
// each of refs, fully qualified as the kubelet names them.
func writeArchive(path string, refs []string, img v1.Image) error {
	images := map[name.Reference]v1.Image{}
	var tags []string
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("image name %q: %w", ref, err)
		}
		images[tag] = img
		tags = append(tags, qualified(tag))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	written := path + ".ggcr"
	defer func() { _ = os.Remove(written) }()
	if err := tarball.MultiRefWriteToFile(written, images); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return retag(written, path, tags)
}

// qualified is tag's name with its domain, docker.io for Docker Hub's.
func qualified(tag name.Tag) string {
	repository := tag.Context().Name()
	if tag.RegistryStr() == name.DefaultRegistry {
		repository = dockerHubDomain + "/" + tag.RepositoryStr()
	}
	return repository + ":" + tag.TagStr()
}

// retag copies the archive from to path with its one image tagged tags.
func retag(from, path string, tags []string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	r, w := tar.NewReader(in), tar.NewWriter(out)
	for {
		header, err := r.Next()
		if errors.Is(err, io.EOF) {
			return w.Close()
		}
		if err != nil {
			return err
		}
		if err := copyEntry(w, header, r, tags); err != nil {
			return err
		}
	}
}

// copyEntry copies one entry, setting the tags in manifest.json.
func copyEntry(w *tar.Writer, header *tar.Header, r io.Reader, tags []string) error {
	if header.Name != archiveManifest {
		if err := w.WriteHeader(header); err != nil {
			return err
		}
		_, err := io.Copy(w, r)
		return err
	}
	var m tarball.Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return fmt.Errorf("reading %s: %w", archiveManifest, err)
	}
	if len(m) != 1 {
		return fmt.Errorf("%s lists %d images, want 1", archiveManifest, len(m))
	}
	m[0].RepoTags = tags
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	header.Size = int64(len(data))
	if err := w.WriteHeader(header); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
