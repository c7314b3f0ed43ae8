package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Image is a single-layer image built without a container runtime: files
// on an empty base.
type Image struct {
	// Ref is the image's name as pods and containerd's sandbox_image give
	// it (a short name: containerd normalizes it on import as the kubelet
	// does when it looks the image up).
	Ref string
	// Files maps absolute paths in the image to host files copied into it
	// with their mode.
	Files map[string]string
	// Entrypoint and User are the image config's.
	Entrypoint []string
	User       string
}

// WriteImageArchive writes img as a `docker save` archive (manifest.json
// with RepoTags, the config, one uncompressed layer), the format
// `ctr images import` reads and tags with the normalized name.
func WriteImageArchive(path string, img Image) error {
	layer, err := imageLayer(img.Files)
	if err != nil {
		return err
	}
	layerDigest := fmt.Sprintf("%x", sha256.Sum256(layer))
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": img.Entrypoint, "User": img.User},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerDigest}},
	})
	if err != nil {
		return fmt.Errorf("encoding the image config: %w", err)
	}
	configName := fmt.Sprintf("%x.json", sha256.Sum256(config))
	layerName := layerDigest + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{img.Ref}, "Layers": []string{layerName}}})
	if err != nil {
		return fmt.Errorf("encoding the image manifest: %w", err)
	}
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for _, entry := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := writeTarFile(tw, entry.name, entry.data, 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing the image archive: %w", err)
	}
	return os.WriteFile(path, archive.Bytes(), 0o644)
}

// imageLayer is a tar of files, parents first, owned by root.
func imageLayer(files map[string]string) ([]byte, error) {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, p := range paths {
		name := strings.TrimPrefix(p, "/")
		for dir := filepath.Dir(name); dir != "." && !dirs[dir]; dir = filepath.Dir(dir) {
			dirs[dir] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}); err != nil {
				return nil, fmt.Errorf("writing the layer: %w", err)
			}
		}
		info, err := os.Stat(files[p])
		if err != nil {
			return nil, fmt.Errorf("reading %s for the image: %w", files[p], err)
		}
		data, err := os.ReadFile(files[p])
		if err != nil {
			return nil, fmt.Errorf("reading %s for the image: %w", files[p], err)
		}
		if err := writeTarFile(tw, name, data, int64(info.Mode().Perm())); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// writeTarFile writes one regular file.
func writeTarFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// BuildStatic builds the Go package pkg of the embedops module as a static
// Linux binary at out.
func BuildStatic(ctx context.Context, pkg, out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, output)
	}
	return nil
}
