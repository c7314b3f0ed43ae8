package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OCI image layout and image spec shapes, only the fields the test reads
// (opencontainers/image-spec specs-go/v1: index.go, manifest.go,
// config.go, descriptor.go).
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string   `json:"User"`
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd"`
		Env        []string `json:"Env"`
	} `json:"config"`
}

// layout is an OCI image layout directory.
type layout string

// blob reads the blob of a descriptor and checks its size and digest.
func (l layout) blob(t *testing.T, d descriptor) []byte {
	t.Helper()
	algorithm, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || algorithm != "sha256" {
		t.Fatalf("unexpected digest %q", d.Digest)
	}
	data, err := os.ReadFile(filepath.Join(string(l), "blobs", algorithm, hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s: digest or size does not match its descriptor", d.Digest)
	}
	return data
}

// readJSON decodes a blob.
func (l layout) readJSON(t *testing.T, d descriptor, into any) {
	t.Helper()
	if err := json.Unmarshal(l.blob(t, d), into); err != nil {
		t.Fatalf("decoding %s: %v", d.Digest, err)
	}
}

// entry is one file of a layer.
type entry struct {
	header *tar.Header
	data   []byte
}

// files reads a gzip-compressed tar layer.
func (l layout) files(t *testing.T, d descriptor) map[string]entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(l.blob(t, d)))
	if err != nil {
		t.Fatalf("layer %s: %v", d.Digest, err)
	}
	files := map[string]entry{}
	tr := tar.NewReader(zr)
	for {
		header, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("layer %s: %v", d.Digest, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(header.Name, "/")] = entry{header: header, data: data}
	}
}
