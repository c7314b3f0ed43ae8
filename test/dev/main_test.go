package main

import (
	"path/filepath"
	"testing"
	"time"
)

// TestDevRunsTheExamples runs what `make dev` runs, without holding the
// cluster: every example must become Ready.
func TestDevRunsTheExamples(t *testing.T) {
	opts := options{
		examples:  filepath.Join("..", "..", "examples"),
		namespace: "default",
		timeout:   5 * time.Minute,
		pidFile:   filepath.Join(t.TempDir(), "pid"),
	}
	if err := run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
}
