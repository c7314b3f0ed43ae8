package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestQualifiedNamesAreTheKubeletsNames(t *testing.T) {
	cases := map[string]string{
		"embedops-controller:latest":           "docker.io/library/embedops-controller:latest",
		"embedops-pause":                       "docker.io/library/embedops-pause:latest",
		"docker.io/org/standin:v1":             "docker.io/org/standin:v1",
		"localhost:5000/embedops/standin:test": "localhost:5000/embedops/standin:test",
	}
	for ref, want := range cases {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := qualified(tag); got != want {
			t.Errorf("qualified(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestWriteArchiveTagsTheImageFullyQualified(t *testing.T) {
	layer, err := random.Layer(64, "application/vnd.oci.image.layer.v1.tar")
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "images", "standin.tar")
	if err := writeArchive(path, []string{"embedops-a:latest", "embedops-b:v1"}, img); err != nil {
		t.Fatal(err)
	}

	var m tarball.Manifest
	if err := json.Unmarshal(entry(t, path, archiveManifest), &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"docker.io/library/embedops-a:latest", "docker.io/library/embedops-b:v1"}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, want) {
		t.Fatalf("manifest.json = %+v, want one image tagged %v", m, want)
	}
	back, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotDigest, _ := back.ConfigName()
	wantDigest, _ := img.ConfigName()
	if gotDigest != wantDigest {
		t.Fatalf("the archive holds config %s, want %s", gotDigest, wantDigest)
	}
	if _, err := os.Stat(path + ".ggcr"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the intermediate archive is left: %v", err)
	}
}

// entry returns the content of the archive's entry named name.
func entry(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if err != nil {
			t.Fatalf("no %s in the archive: %v", name, err)
		}
		if h.Name == name {
			data, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}
