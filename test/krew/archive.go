package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// archive is one platform's package.
type archive struct {
	os, arch    string
	path        string
	uri, sha256 string
}

// platforms are those the plugin is packaged for.
var platforms = [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// buildArchive cross-compiles the CLI for goos/goarch with ldflags and packs
// it as kubectl-embedops in a .tar.gz in dir.
func buildArchive(ctx context.Context, repo, dir, goos, goarch, ldflags string) (archive, error) {
	binary := filepath.Join(dir, fmt.Sprintf("%s_%s_%s", pluginBin, goos, goarch))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", binary, "./cmd/embedops")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return archive{}, fmt.Errorf("building %s/%s: %w\n%s", goos, goarch, err, out)
	}
	defer func() { _ = os.Remove(binary) }()
	data, err := tarGz(binary, pluginBin)
	if err != nil {
		return archive{}, err
	}
	path := binary + ".tar.gz"
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return archive{}, err
	}
	sum := sha256.Sum256(data)
	return archive{os: goos, arch: goarch, path: path, sha256: hex.EncodeToString(sum[:])}, nil
}

// tarGz packs the file at path under name, executable.
func tarGz(path, name string) ([]byte, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// withURI sets where krew downloads the archive: under base, else the
// archive's own file:// path.
func (a archive) withURI(base string) archive {
	if base == "" {
		a.uri = "file://" + a.path
	} else {
		a.uri = strings.TrimRight(base, "/") + "/" + filepath.Base(a.path)
	}
	return a
}
