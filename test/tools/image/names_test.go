package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestImageNamesAreReadFromTheRepository(t *testing.T) {
	repo := t.TempDir()
	write(t, filepath.Join(repo, "api", "v1", "types.go"), "package v1\n\nconst (\n\tOther = 1\n\t// DefaultImage is the default.\n\tDefaultImage = \"example.test/tei:cpu-1\"\n)\n")
	write(t, filepath.Join(repo, "api", "v1", "types_test.go"), "package v1\n\nconst Test = \"no\"\n")
	write(t, filepath.Join(repo, "examples", "a.yaml"), "kind: EmbeddingServer\nmetadata:\n  name: a\n  image: not-this\nspec:\n  model:\n    image: nor-this\n  image: example.test/tei:1 # the CUDA image\n")

	if got, err := goConstant(repo, "api/v1.DefaultImage"); err != nil || got != "example.test/tei:cpu-1" {
		t.Errorf("goConstant = %q, %v", got, err)
	}
	for _, missing := range []string{"api/v1.Test", "api/v1.Other", "api/v1.Absent", "nodot"} {
		if got, err := goConstant(repo, missing); err == nil {
			t.Errorf("goConstant(%s) = %q, want an error", missing, got)
		}
	}
	if got, err := exampleImage(repo, "examples/a.yaml"); err != nil || got != "example.test/tei:1" {
		t.Errorf("exampleImage = %q, %v", got, err)
	}
}

func TestParentsAddEachMissingDirectoryOnce(t *testing.T) {
	files := []file{{name: "usr/", dir: true}}
	got := parents(files, "usr/local/bin/router")
	if len(got) != 2 || got[0].name != "usr/local/" || got[1].name != "usr/local/bin/" {
		t.Fatalf("parents = %+v", got)
	}
	if got := parents(files, "pause"); len(got) != 0 {
		t.Fatalf("parents of a file at the root = %+v", got)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
