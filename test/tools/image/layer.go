package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRootID is the user and group the controller image runs as:
// distroless's nonroot, which config/manager's Deployment also sets.
const nonRootID = 65532

// nonRootUser is nonRootID as an image config's User.
var nonRootUser = fmt.Sprintf("%d:%d", nonRootID, nonRootID)

// epoch is the time of every file, so the same inputs give the same layer.
var epoch = time.Unix(0, 0).UTC()

// file is one entry of the layer.
type file struct {
	name string
	mode int64
	data []byte
	dir  bool
}

// rootfs is the image's only layer: the directories, passwd and group with
// the non-root user, the CA bundle, and each binary at its path in the
// image (by binaryPaths, to its local path), with its parent directories.
func rootfs(binaryPaths map[string]string, caBundle string) (v1.Layer, error) {
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	files := []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootID, nonRootID)},
		{name: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", nonRootID)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	for _, name := range slices.Sorted(maps.Keys(binaryPaths)) {
		data, err := os.ReadFile(binaryPaths[name])
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		rel := strings.TrimPrefix(name, "/")
		files = append(files, parents(files, rel)...)
		files = append(files, file{name: rel, mode: 0o755, data: data})
	}
	content, err := tarOf(files)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// parents are the directories above name that files lacks, outermost
// first.
func parents(files []file, name string) []file {
	var dirs []file
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if !slices.ContainsFunc(files, func(f file) bool { return f.name == dir+"/" }) {
			dirs = append([]file{{name: dir + "/", mode: 0o755, dir: true}}, dirs...)
		}
	}
	return dirs
}

// tarOf writes files as an uncompressed tar; the home directory belongs to
// the non-root user, everything else to root.
func tarOf(files []file) ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, f := range files {
		header := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch, Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX}
		if f.dir {
			header.Typeflag, header.Size = tar.TypeDir, 0
		}
		if f.name == "home/nonroot/" {
			header.Uid, header.Gid = nonRootID, nonRootID
		}
		if err := w.WriteHeader(header); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.name, err)
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}
